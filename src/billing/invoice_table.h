#pragma once

// The `invoices`, `invoice_lines` and `invoice_months_closed` tables (migration 13, R-13,
// docs/billing.md "Invoices"): one invoice per billing account, UTC month and currency, one line
// per billing session in that month. Written once by the month close (billing/invoices.h), never
// changed afterwards. The billing component owns them.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// One line: a billing session's minutes in the invoice's month.
struct InvoiceLineRow {
  std::string invoice_id;
  std::string session_id;  ///< the billing session ("bil_…")
  std::string instance_id;
  std::string instance_name;
  std::string gpu_type;
  std::string person_id;             ///< who launched it
  int64_t minutes = 0;               ///< billed minutes that begin in the month (SplitByMonth)
  int64_t price_minor_per_hour = 0;  ///< the session's locked price, minor units per hour
  int64_t amount_minor = 0;          ///< LineAmountMinor(price, minutes), in the invoice's currency
};

/// An invoice. `total_minor` is the sum of its lines' amounts.
struct InvoiceRow {
  std::string id;  ///< "inv_…"
  std::string billing_account_id;
  std::string month;     ///< "YYYY-MM" (UTC)
  std::string currency;  ///< ISO 4217 code as the sessions carry it, e.g. "usd"
  int64_t total_minor = 0;
  int64_t created_at = 0;             ///< Unix seconds
  std::vector<InvoiceLineRow> lines;  ///< filled by OfAccount and OfMonth, by session id
};

/// The tables' SQL inside the caller's transaction; errors are the store's.
class InvoiceTable {
 public:
  InvoiceTable() = delete;

  /// Inserts `row` (not its lines) unless the account already has an invoice for that month and
  /// currency (UNIQUE (billing_account_id, month, currency)). Returns whether it was inserted.
  static core::Result<bool> InsertIfAbsent(store::Transaction& tx, const InvoiceRow& row);
  /// Inserts one line.
  static core::Result<void> InsertLine(store::Transaction& tx, const InvoiceLineRow& line);
  /// The billing sessions that already have a line on some invoice of `month` ("YYYY-MM"),
  /// whichever account it belongs to: a session moved to another account after the month was
  /// closed (a new team's, docs/teams.md "Billing") is never billed for that month twice.
  static core::Result<std::set<std::string>> SessionsBilledIn(store::Transaction& tx,
                                                              const std::string& month);
  /// Records that `month` was closed at `now` (Unix seconds) with `invoices` invoices, unless it
  /// was already. Returns whether it was recorded now.
  static core::Result<bool> MarkClosed(store::Transaction& tx, const std::string& month,
                                       int64_t now, int64_t invoices);
  /// When `month` was closed (Unix seconds); nullopt when it was not.
  static core::Result<std::optional<int64_t>> ClosedAt(store::Transaction& tx,
                                                       const std::string& month);
  /// The invoices of billing account `account_id` with their lines, newest month first.
  static core::Result<std::vector<InvoiceRow>> OfAccount(store::Transaction& tx,
                                                         const std::string& account_id);
  /// Every invoice of `month` with its lines, by billing account and currency.
  static core::Result<std::vector<InvoiceRow>> OfMonth(store::Transaction& tx,
                                                       const std::string& month);
};

}  // namespace gpuwerk::billing
