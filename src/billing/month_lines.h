#pragma once

// What a UTC month's invoices say, closed or not (R-13, docs/billing.md "Running total"): the
// lines the month close makes (CloseMonth) and, for a month not closed yet, the lines it would
// make now. One computation (SessionCharges), so a running total agrees with the invoice the
// close later makes to the minor unit.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "billing/invoice_table.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// (billing account id, currency) → that invoice's lines, in session order.
using LinesByInvoice = std::map<std::pair<std::string, std::string>, std::vector<InvoiceLineRow>>;

/// The lines the month close of the UTC month starting at `month_start` (Unix seconds) would make
/// at `now`: one per billing session with billed minutes in the month that has no line on any
/// invoice of the month yet, on the account it is billed to now, amounts from SessionCharges
/// (`silent_after`: the evidence rule, metering.h). `only_account` non-empty: that account's
/// lines only. Lines carry no invoice id. Reads through `tx`; errors: the store's.
core::Result<LinesByInvoice> PendingMonthLines(store::Transaction& tx, int64_t month_start,
                                               int64_t now, int64_t silent_after,
                                               const std::string& only_account = "");

/// One currency's total.
struct CurrencyTotal {
  std::string currency;      ///< ISO 4217 code as the sessions carry it, e.g. "usd"
  int64_t amount_minor = 0;  ///< minor units of `currency`
  bool operator==(const CurrencyTotal&) const = default;
};

/// One billing account's month as its invoices say it.
struct AccountMonth {
  std::string month;                 ///< "YYYY-MM" (UTC)
  bool closed = false;               ///< the month was closed: `invoices` are the stored ones
  int64_t as_of = 0;                 ///< Unix seconds: when the lines were read or computed
  std::vector<InvoiceRow> invoices;  ///< one per currency, by currency; open months: id "" and
                                     ///< created_at 0, total the sum of the lines
};

/// Billing account `account_id`'s month starting at `month_start` at `now`: its stored invoices
/// when the month is closed, else PendingMonthLines grouped into would-be invoices. Errors: the
/// store's.
core::Result<AccountMonth> MonthOfAccount(store::Transaction& tx, const std::string& account_id,
                                          int64_t month_start, int64_t now, int64_t silent_after);

/// The per-currency totals of `invoices`, by currency (currencies with no line left out).
std::vector<CurrencyTotal> TotalsOf(const std::vector<InvoiceRow>& invoices);

}  // namespace gpuwerk::billing
