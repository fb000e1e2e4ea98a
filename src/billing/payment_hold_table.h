#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// A hold on a billing account: a provider's invoice whose payment failed (docs/billing.md
/// "Gating"). While an account has one, launches and restarts answer 402 `payment_failed`.
struct PaymentHold {
  std::string provider_ref;        ///< the provider's invoice id (Stripe "in_…"); the key
  std::string billing_account_id;  ///< BillingAccount::id
  std::string reason;              ///< "payment_failed"
  int64_t created_at = 0;          ///< Unix seconds
};

/// The `payment_holds` table (migration 19): the one place that holds its SQL. Every function
/// works inside the caller's transaction; errors are the store's. Stateless.
class PaymentHoldTable {
 public:
  PaymentHoldTable() = delete;

  /// Whether `billing_account_id` has any hold (one indexed read: the launch gate).
  static core::Result<bool> Exists(store::Transaction& tx, const std::string& billing_account_id);
  /// The holds of `billing_account_id`, oldest first (empty when none).
  static core::Result<std::vector<PaymentHold>> Of(store::Transaction& tx,
                                                   const std::string& billing_account_id);
  /// Records `hold`, replacing one with the same provider_ref.
  static core::Result<void> Put(store::Transaction& tx, const PaymentHold& hold);
  /// Ends the hold of `provider_ref`. True when one went.
  static core::Result<bool> Delete(store::Transaction& tx, const std::string& provider_ref);
};

}  // namespace gpuwerk::billing
