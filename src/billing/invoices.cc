#include "billing/invoices.h"

#include <map>
#include <set>
#include <tuple>

#include "audit/audit_log.h"
#include "billing/billing_session_table.h"
#include "billing/charges.h"
#include "billing/manual_provider.h"
#include "billing/money.h"
#include "billing/month_lines.h"
#include "billing/payment_method_table.h"

namespace gpuwerk::billing {

Invoices::Invoices(store::Database& db, core::Clock& clock, core::Rng& rng, int64_t silent_after,
                   ResolveAccount resolve, std::string collecting_provider)
    : db_(db),
      clock_(clock),
      rng_(rng),
      silent_after_(silent_after),
      resolve_(resolve ? std::move(resolve) : ResolveAccount(SoloAccountOf)),
      collecting_provider_(std::move(collecting_provider)) {}

core::Result<MonthCloseResult> Invoices::CloseMonth(std::string_view month,
                                                    const std::string& actor_id,
                                                    const std::string& source_address) {
  GPUWERK_ASSIGN_OR_RETURN(const int64_t from, ParseMonth(month));
  const int64_t to = NextMonthStart(from);
  const std::string label = MonthLabel(from);
  return db_.Write([&](store::Transaction& tx) -> core::Result<MonthCloseResult> {
    const int64_t now = clock_.NowUnix();
    if (now < to) {
      return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "month_not_ended",
                                    "Month " + label +
                                        " has not ended yet (UTC): it can be closed from " +
                                        MonthLabel(to) + "-01T00:00:00Z on.")
                            .WithDetail("month", label));
    }
    MonthCloseResult result{.month = label};
    GPUWERK_ASSIGN_OR_RETURN(auto closed_at, InvoiceTable::ClosedAt(tx, label));
    result.already_closed = closed_at.has_value();
    GPUWERK_ASSIGN_OR_RETURN(auto invoices, PendingMonthLines(tx, from, now, silent_after_));
    // Accounts the operator collects from (a card recorded by hand) are never pushed.
    std::set<std::string> operator_collects;
    if (!collecting_provider_.empty() && !invoices.empty()) {
      GPUWERK_ASSIGN_OR_RETURN(operator_collects, PaymentMethodTable::AccountsOfProvider(
                                                      tx, std::string(ManualProvider::kName)));
    }
    for (auto& [key, lines] : invoices) {
      InvoiceRow invoice{.id = core::NewId(rng_, "inv"),
                         .billing_account_id = key.first,
                         .month = label,
                         .currency = key.second,
                         .total_minor = 0,
                         .created_at = now};
      for (const InvoiceLineRow& l : lines) invoice.total_minor += l.amount_minor;
      GPUWERK_ASSIGN_OR_RETURN(const bool inserted, InvoiceTable::InsertIfAbsent(tx, invoice));
      if (!inserted) continue;  // an earlier (or concurrent) close made it: never changed
      ++result.invoices_created;
      for (InvoiceLineRow& l : lines) {
        l.invoice_id = invoice.id;
        GPUWERK_TRY(InvoiceTable::InsertLine(tx, l));
        ++result.lines_created;
      }
      if (!collecting_provider_.empty() &&
          !operator_collects.contains(invoice.billing_account_id)) {
        GPUWERK_TRY(InvoiceTable::QueuePush(tx, invoice.id, collecting_provider_, now));
        ++result.invoices_queued;
      }
    }
    GPUWERK_ASSIGN_OR_RETURN(auto count,
                             tx.QueryOne("SELECT COUNT(*) FROM invoices WHERE month = ?", {label}));
    result.invoices = count ? count->Int(0) : 0;
    GPUWERK_ASSIGN_OR_RETURN(const bool first_close,
                             InvoiceTable::MarkClosed(tx, label, now, result.invoices));
    if (first_close || result.invoices_created > 0) {
      GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                     {.actor_id = actor_id,
                                      .action = "billing.month_close",
                                      .target = label,
                                      .source_address = source_address,
                                      .detail = {{"invoices_created", result.invoices_created},
                                                 {"lines_created", result.lines_created},
                                                 {"invoices", result.invoices},
                                                 {"invoices_queued", result.invoices_queued}}}));
    }
    return result;
  });
}

core::Result<std::optional<MonthCloseResult>> Invoices::CloseDueMonth() {
  const int64_t now = clock_.NowUnix();
  const int64_t this_month = MonthStart(now);
  if (now < this_month + kMonthCloseGraceSeconds) return std::optional<MonthCloseResult>();
  const std::string previous = MonthLabel(this_month - 1);
  GPUWERK_ASSIGN_OR_RETURN(auto closed_at, db_.Read([&](store::Transaction& tx) {
    return InvoiceTable::ClosedAt(tx, previous);
  }));
  if (closed_at) return std::optional<MonthCloseResult>();
  GPUWERK_ASSIGN_OR_RETURN(auto result, CloseMonth(previous, "", "system"));
  return std::optional<MonthCloseResult>(std::move(result));
}

core::Result<std::vector<InvoiceRow>> Invoices::ForPerson(const std::string& person_id) {
  return db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<InvoiceRow>> {
    GPUWERK_ASSIGN_OR_RETURN(const BillingAccount account, resolve_(tx, person_id));
    GPUWERK_ASSIGN_OR_RETURN(auto invoices, InvoiceTable::OfAccount(tx, account.id));
    if (account.may_manage) return invoices;
    // A team member who does not manage the account: their own lines only, totalled.
    std::vector<InvoiceRow> own;
    for (InvoiceRow& inv : invoices) {
      std::erase_if(inv.lines, [&](const InvoiceLineRow& l) { return l.person_id != person_id; });
      if (inv.lines.empty()) continue;
      inv.total_minor = 0;
      for (const InvoiceLineRow& l : inv.lines) inv.total_minor += l.amount_minor;
      own.push_back(std::move(inv));
    }
    return own;
  });
}

core::Result<CurrentMonth> Invoices::CurrentMonthOf(const std::string& person_id) {
  return db_.Read([&](store::Transaction& tx) -> core::Result<CurrentMonth> {
    GPUWERK_ASSIGN_OR_RETURN(const BillingAccount account, resolve_(tx, person_id));
    const int64_t now = clock_.NowUnix();
    GPUWERK_ASSIGN_OR_RETURN(AccountMonth month,
                             MonthOfAccount(tx, account.id, now, now, silent_after_));
    if (!account.may_manage) {
      // A team member who does not manage the account: their own launches only.
      for (InvoiceRow& inv : month.invoices) {
        std::erase_if(inv.lines, [&](const InvoiceLineRow& l) { return l.person_id != person_id; });
      }
    }
    return CurrentMonth{.month = month.month, .as_of = now, .totals = TotalsOf(month.invoices)};
  });
}

core::Result<AccountMonth> Invoices::AccountMonthOf(store::Transaction& tx,
                                                    const std::string& account_id,
                                                    int64_t month_start) {
  return MonthOfAccount(tx, account_id, month_start, clock_.NowUnix(), silent_after_);
}

std::string CsvCell(std::string_view text) {
  std::string cell(text);
  if (!cell.empty() && (cell[0] == '=' || cell[0] == '+' || cell[0] == '-' || cell[0] == '@' ||
                        cell[0] == '\t' || cell[0] == '\r')) {
    cell.insert(cell.begin(), '\'');
  }
  if (cell.find_first_of(",\"\r\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

core::Result<std::string> Invoices::ExportCsv(std::string_view month) {
  GPUWERK_ASSIGN_OR_RETURN(const int64_t from, ParseMonth(month));
  const std::string label = MonthLabel(from);
  GPUWERK_ASSIGN_OR_RETURN(auto invoices, db_.Read([&](store::Transaction& tx) {
    return InvoiceTable::OfMonth(tx, label);
  }));
  std::string out =
      "invoice_id,billing_account_id,month,currency,invoice_total_minor,billing_session_id,"
      "instance_id,instance_name,gpu_type,person_id,minutes,price_minor_per_hour,amount_minor,"
      "amount\r\n";
  for (const InvoiceRow& inv : invoices) {
    for (const InvoiceLineRow& l : inv.lines) {
      const std::string cells[] = {inv.id,
                                   inv.billing_account_id,
                                   inv.month,
                                   inv.currency,
                                   std::to_string(inv.total_minor),
                                   l.session_id,
                                   l.instance_id,
                                   l.instance_name,
                                   l.gpu_type,
                                   l.person_id,
                                   std::to_string(l.minutes),
                                   std::to_string(l.price_minor_per_hour),
                                   std::to_string(l.amount_minor),
                                   FormatAmount(l.amount_minor, inv.currency)};
      bool first = true;
      for (const std::string& c : cells) {
        if (!first) out += ',';
        first = false;
        out += CsvCell(c);
      }
      out += "\r\n";
    }
  }
  return out;
}

}  // namespace gpuwerk::billing
