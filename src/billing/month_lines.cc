#include "billing/month_lines.h"

#include <algorithm>

#include "billing/billing_session_table.h"
#include "billing/charges.h"
#include "billing/money.h"

namespace gpuwerk::billing {

core::Result<LinesByInvoice> PendingMonthLines(store::Transaction& tx, int64_t month_start,
                                               int64_t now, int64_t silent_after,
                                               const std::string& only_account) {
  const int64_t from = MonthStart(month_start);
  const int64_t to = NextMonthStart(from);
  GPUWERK_ASSIGN_OR_RETURN(auto sessions, only_account.empty()
                                              ? BillingSessionTable::ListOverlapping(tx, from, to)
                                              : BillingSessionTable::ListOverlappingOfAccount(
                                                    tx, only_account, from, to));
  GPUWERK_ASSIGN_OR_RETURN(const auto billed, InvoiceTable::SessionsBilledIn(tx, MonthLabel(from)));
  LinesByInvoice out;
  for (const SessionWithGaps& s : sessions) {
    if (!only_account.empty() && s.session.billing_account_id != only_account) continue;
    // Already on this month's invoice of the account it had then (it moved since): once only.
    if (billed.contains(s.session.id)) continue;
    for (const MonthCharge& c : SessionCharges(s.session, s.gaps, now, silent_after)) {
      if (c.month_start != from) continue;
      out[{s.session.billing_account_id, s.session.currency}].push_back(
          {.invoice_id = "",
           .session_id = s.session.id,
           .instance_id = s.session.instance_id,
           .instance_name = s.session.instance_name,
           .gpu_type = s.session.gpu_type,
           .person_id = s.session.person_id,
           .minutes = c.minutes,
           .price_minor_per_hour = s.session.price_minor_per_hour,
           .amount_minor = c.amount_minor});
    }
  }
  return out;
}

core::Result<AccountMonth> MonthOfAccount(store::Transaction& tx, const std::string& account_id,
                                          int64_t month_start, int64_t now, int64_t silent_after) {
  const int64_t from = MonthStart(month_start);
  AccountMonth out{.month = MonthLabel(from), .as_of = now};
  GPUWERK_ASSIGN_OR_RETURN(auto closed_at, InvoiceTable::ClosedAt(tx, out.month));
  if (closed_at) {
    out.closed = true;
    GPUWERK_ASSIGN_OR_RETURN(auto all, InvoiceTable::OfAccount(tx, account_id));
    for (InvoiceRow& inv : all) {
      if (inv.month == out.month) out.invoices.push_back(std::move(inv));
    }
    std::sort(out.invoices.begin(), out.invoices.end(),
              [](const InvoiceRow& a, const InvoiceRow& b) { return a.currency < b.currency; });
    return out;
  }
  GPUWERK_ASSIGN_OR_RETURN(auto pending,
                           PendingMonthLines(tx, from, now, silent_after, account_id));
  for (auto& [key, lines] : pending) {
    InvoiceRow inv{.id = "",
                   .billing_account_id = key.first,
                   .month = out.month,
                   .currency = key.second,
                   .total_minor = 0,
                   .created_at = 0};
    for (const InvoiceLineRow& l : lines) inv.total_minor += l.amount_minor;
    inv.lines = std::move(lines);
    out.invoices.push_back(std::move(inv));
  }
  return out;
}

std::vector<CurrencyTotal> TotalsOf(const std::vector<InvoiceRow>& invoices) {
  std::map<std::string, int64_t> sums;
  for (const InvoiceRow& inv : invoices) {
    for (const InvoiceLineRow& l : inv.lines) {
      sums[inv.currency] += l.amount_minor;
    }
  }
  std::vector<CurrencyTotal> out;
  for (const auto& [currency, amount] : sums) {
    out.push_back({.currency = currency, .amount_minor = amount});
  }
  return out;
}

}  // namespace gpuwerk::billing
