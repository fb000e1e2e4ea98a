#pragma once

// Collecting invoices (docs/billing.md "Collecting invoices"): the closed invoices the month
// close queued (`invoice_pushes`) are pushed to the payment provider that collects them
// (PaymentProvider::PushInvoice: Stripe invoice items, an invoice, finalize), each on its own,
// so that one account's error never holds up another's; a failed push is recorded and tried
// again by a later background pass.

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "billing/invoice_table.h"
#include "billing/payment_provider.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// What became of one invoice's push.
struct InvoicePushResult {
  std::string invoice_id;  ///< "inv_…"
  std::string billing_account_id;
  std::string month;         ///< "YYYY-MM" (UTC)
  std::string currency;      ///< ISO 4217, lowercase
  int64_t total_minor = 0;   ///< the invoice's total, minor units of `currency`
  bool pushed = false;       ///< on the provider's side now (by this attempt or a concurrent one)
  std::string provider_ref;  ///< the provider's id for it (Stripe "in_…") when pushed
  /// When not pushed: the Error::api_code (e.g. provider_unavailable, no_customer, stripe_error)
  /// and its message (bounded, escaped: outside text).
  std::string error_code;
  std::string error_message;
  int64_t attempts = 0;         ///< attempts so far, this one included
  int64_t next_attempt_at = 0;  ///< when not pushed: the background pass tries again from then
};

/// What one pass did.
struct InvoicePushReport {
  std::vector<InvoicePushResult> results;  ///< one per invoice tried, in the order tried
  /// PushMonth only: the month's invoices queued for the provider that were pushed before.
  int64_t pushed_before = 0;
};

/// The wait before attempt n + 1 after n failed attempts (seconds): 60 · 2^(n−1), at most
/// kPushRetryMaxSeconds. The first retry is the next background pass (a minute).
int64_t PushRetryDelaySeconds(int64_t failed_attempts);
/// The longest wait between two attempts at one invoice (seconds): 6 hours.
inline constexpr int64_t kPushRetryMaxSeconds = 6 * 3600;
/// How many invoices one PushDue call tries at most (the worker calls it again while it fills).
inline constexpr int64_t kPushBatch = 50;

/// Pushes queued invoices to `provider` (which CollectsInvoices) outside any store transaction,
/// one at a time. Each success is recorded (`invoice_pushes.pushed_at`, the provider's id) and
/// audited `billing.invoice_push` (target the invoice; detail: billing account, provider, the
/// provider's id, month, currency, total); each failure is recorded (attempts, last error, next
/// attempt: PushRetryDelaySeconds) and logged escaped, and the pass goes on to the next invoice.
/// A push whose answer was lost is simply tried again: the provider resends the same request
/// under the same idempotency key (StripeProvider's ledger) and never pushes an invoice twice.
/// Thread-safe: passes run one at a time (a mutex); several servers may push at once (the
/// provider's ledger and idempotency keys keep it to one invoice). References outlive it.
class InvoicePusher {
 public:
  InvoicePusher(store::Database& db, core::Clock& clock, core::Rng& rng, PaymentProvider& provider);

  /// The background pass: the queued pushes due now (next_attempt_at ≤ the clock's now), at
  /// most `limit`, oldest due first. Errors: the store's (reading the queue); a provider's error
  /// is a result, never an error.
  core::Result<InvoicePushReport> PushDue(int64_t limit = kPushBatch);

  /// Every queued, not yet pushed invoice of `month` ("YYYY-MM"), whenever its next attempt was
  /// due (the operator's `gpuwerk admin invoices close`), with `actor_id` and `source_address`
  /// in the audit. Errors: kInvalidArgument invalid_month; the store's.
  core::Result<InvoicePushReport> PushMonth(std::string_view month, const std::string& actor_id,
                                            const std::string& source_address);

  /// The provider pushed to.
  const PaymentProvider& provider() const { return provider_; }

 private:
  /// Pushes one queued invoice and records how it went.
  core::Result<InvoicePushResult> PushOne(const InvoicePushRow& queued, const std::string& actor_id,
                                          const std::string& source_address);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  PaymentProvider& provider_;
  std::mutex pass_mu_;  ///< one pass at a time in this process
};

/// The provider's view of a queued invoice: one line per invoice line (id "<invoice id>-<billing
/// session id>", amount, and a description such as "gpu-box (spark-1x), 61 minutes, 2026-11").
InvoiceToPush ToPush(const InvoiceRow& invoice);

}  // namespace gpuwerk::billing
