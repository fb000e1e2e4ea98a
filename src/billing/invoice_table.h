#pragma once

// The `invoices`, `invoice_lines` and `invoice_months_closed` tables (migration 13, R-13,
// docs/billing.md "Invoices"): one invoice per billing account, UTC month and currency, one line
// per billing session in that month. Written once by the month close (billing/invoices.h), never
// changed afterwards. And `invoice_pushes` (migration 21, docs/billing.md "Collecting
// invoices"): the invoices queued for the payment provider that collects them, and how each push
// went (billing/invoice_pusher.h). The billing component owns them.

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

/// An invoice queued for a push to the payment provider that collects it (`invoice_pushes`).
struct InvoicePushRow {
  InvoiceRow invoice;           ///< with its lines (PendingPushes); without (PushOf)
  std::string provider;         ///< PaymentProvider::name(), e.g. "stripe"
  int64_t queued_at = 0;        ///< Unix seconds: the month close that made the invoice
  int64_t attempts = 0;         ///< pushes tried so far
  int64_t next_attempt_at = 0;  ///< Unix seconds: the background pass tries again from then
  std::string last_error_code;  ///< the last failed attempt's Error::api_code; "" when none
  std::string last_error;       ///< its message, bounded (kPushErrorBytes); "" when none
  std::string provider_ref;     ///< the provider's id for the invoice (Stripe "in_…") once pushed
  std::optional<int64_t> pushed_at;  ///< Unix seconds; nullopt until pushed
};

/// How many bytes of a failed push's message are stored (InvoicePushRow::last_error).
inline constexpr size_t kPushErrorBytes = 500;

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

  /// Queues invoice `invoice_id` for a push to `provider`, due at once (`now`, Unix seconds);
  /// nothing when it is queued already.
  static core::Result<void> QueuePush(store::Transaction& tx, const std::string& invoice_id,
                                      const std::string& provider, int64_t now);
  /// The queued pushes to `provider` not done yet, each with its invoice and lines, oldest due
  /// first: with `month` "" those due at `due_by` (next_attempt_at <= due_by), at most `limit`;
  /// with a `month` ("YYYY-MM") every one of that month's invoices, whenever due (`due_by` and
  /// `limit` unused). Two statements whatever the count.
  static core::Result<std::vector<InvoicePushRow>> PendingPushes(store::Transaction& tx,
                                                                 const std::string& provider,
                                                                 const std::string& month,
                                                                 int64_t due_by, int64_t limit);
  /// The push state of `invoice_id` (its invoice's lines not read); nullopt when not queued.
  static core::Result<std::optional<InvoicePushRow>> PushOf(store::Transaction& tx,
                                                            const std::string& invoice_id);
  /// How many of `month`'s invoices queued for `provider` are pushed already.
  static core::Result<int64_t> PushedCount(store::Transaction& tx, const std::string& provider,
                                           const std::string& month);
  /// Records the push of `invoice_id` as done at `now` with the provider's id for it (one more
  /// attempt). False when it was recorded as done before (nothing changed).
  static core::Result<bool> RecordPushDone(store::Transaction& tx, const std::string& invoice_id,
                                           const std::string& provider_ref, int64_t now);
  /// Records a failed attempt at `invoice_id` (one more attempt; `code` and `message`, bounded
  /// to kPushErrorBytes, as the last error; tried again from `next_attempt_at`). False when the
  /// push was recorded as done meanwhile (nothing changed: a concurrent pusher got there).
  static core::Result<bool> RecordPushFailed(store::Transaction& tx, const std::string& invoice_id,
                                             const std::string& code, const std::string& message,
                                             int64_t next_attempt_at);
};

}  // namespace gpuwerk::billing
