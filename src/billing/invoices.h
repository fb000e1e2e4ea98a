#pragma once

// Monthly invoices (R-13, docs/billing.md "Invoices" and "Month close"): closing a UTC month
// into one invoice per billing account and currency, a person's invoices, the operator's CSV
// export.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "billing/billing_account.h"
#include "billing/invoice_table.h"
#include "billing/month_lines.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// What one month close did.
struct MonthCloseResult {
  std::string month;             ///< "YYYY-MM"
  int64_t invoices_created = 0;  ///< by this run (0 when another run made them)
  int64_t lines_created = 0;     ///< by this run
  int64_t invoices = 0;          ///< the month's invoices after this run
  bool already_closed = false;   ///< the month was closed before this run
  /// Invoices this run queued for a push to the collecting provider (InvoicePusher); 0 when
  /// the provider collects nothing (manual).
  int64_t invoices_queued = 0;
};

/// The current UTC month's running total as a person may see it.
struct CurrentMonth {
  std::string month;                  ///< "YYYY-MM" (UTC)
  int64_t as_of = 0;                  ///< Unix seconds
  std::vector<CurrencyTotal> totals;  ///< by currency; empty when nothing is billed yet
};

/// How long after a month ends the background close runs (seconds): the last sync rounds and
/// deletes of the month are in by then.
inline constexpr int64_t kMonthCloseGraceSeconds = 3600;

/// Invoices over the store. Thread-safe (state lives in the store); references outlive it.
class Invoices {
 public:
  /// `silent_after`: seconds after which a host counts as silent (SchedOptions::
  /// host_unknown_after_seconds; the evidence rule, metering.h). `resolve` (default SoloAccountOf)
  /// says which billing account a person's invoices are read from. `collecting_provider`: the
  /// PaymentProvider::name() of a provider that collects invoices (CollectsInvoices, e.g.
  /// "stripe"), for which the month close queues each invoice it makes; "" (the default, the
  /// manual provider) queues none.
  Invoices(store::Database& db, core::Clock& clock, core::Rng& rng, int64_t silent_after,
           ResolveAccount resolve = {}, std::string collecting_provider = {});

  /// Closes UTC month `month` ("YYYY-MM") for every billing account: for each billing session with
  /// billed minutes in the month (SessionCharges as of now), one line on its account's invoice in
  /// its currency; an invoice's total is the sum of its lines. Idempotent: an account that has
  /// the month's invoice in that currency already gets nothing (UNIQUE key; two concurrent runs
  /// make one invoice), a session with a line on any invoice of the month gets no second one
  /// (it may have moved to a team's account since), and invoices are never changed once made.
  /// With a collecting provider, each invoice made is queued for its push (`invoice_pushes`, due
  /// at once; InvoicePusher sends it after the commit), except for accounts whose payment method
  /// on file the operator recorded (provider "manual": the operator collects those). One
  /// transaction; audited `billing.month_close` (target the month) when it made an invoice or first
  /// closed the month. Errors: kInvalidArgument invalid_month; kFailedPrecondition month_not_ended
  /// (the month has not ended yet at the clock's now); the store's.
  core::Result<MonthCloseResult> CloseMonth(std::string_view month, const std::string& actor_id,
                                            const std::string& source_address);

  /// The background close: the month before the current one when it ended at least
  /// kMonthCloseGraceSeconds ago and is not closed yet (CloseMonth, actor the system); nullopt
  /// when there is nothing to do. Errors: CloseMonth's.
  core::Result<std::optional<MonthCloseResult>> CloseDueMonth();

  /// The invoices of the billing account that pays for `person_id` now (ResolveAccount), newest
  /// month first, with their lines. A person who may not manage that account (a team member,
  /// BillingAccount::may_manage false) gets only the invoices that hold lines of their own
  /// launches, with those lines only and `total_minor` their sum: members never see another
  /// member's usage. Errors: the resolver's (not_found); the store's.
  core::Result<std::vector<InvoiceRow>> ForPerson(const std::string& person_id);

  /// The current UTC month's running total of the billing account that pays for `person_id` now
  /// (ResolveAccount): what the month's invoices would say if it closed at the clock's now
  /// (MonthOfAccount: sessions billed to that account only, SessionCharges, so it agrees with
  /// the invoice to the minor unit). A person who may not manage the account (a team member)
  /// gets the total of their own launches only. Errors: the resolver's; the store's.
  core::Result<CurrentMonth> CurrentMonthOf(const std::string& person_id);

  /// Billing account `account_id`'s month starting at `month_start` (Unix seconds, any second of
  /// the month) as of the clock's now, inside the caller's transaction (MonthOfAccount with this
  /// object's evidence rule): the stored invoices of a closed month, else the running lines.
  /// Errors: the store's.
  core::Result<AccountMonth> AccountMonthOf(store::Transaction& tx, const std::string& account_id,
                                            int64_t month_start);

  /// Every invoice line of `month` as CSV (RFC 4180, CRLF line ends, a header row; text cells
  /// that start with =, +, -, @, a tab or a carriage return get a leading ' so spreadsheets do
  /// not run them as formulas). Errors: kInvalidArgument invalid_month; the store's.
  core::Result<std::string> ExportCsv(std::string_view month);

 private:
  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  int64_t silent_after_;
  ResolveAccount resolve_;
  std::string collecting_provider_;
};

/// One CSV cell (RFC 4180 quoting; the formula-injection guard of ExportCsv).
std::string CsvCell(std::string_view text);

}  // namespace gpuwerk::billing
