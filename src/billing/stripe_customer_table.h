#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// A billing account's Stripe customer as stored (docs/stripe.md "Customers").
struct StripeCustomer {
  std::string customer_id;         ///< Stripe "cus_…"
  std::string billing_account_id;  ///< BillingAccount::id
  int64_t created_at = 0;          ///< Unix seconds: recorded
  int64_t deleted_at = 0;          ///< Unix seconds: noticed deleted on Stripe's side; 0 live
};

/// The `stripe_customers` table (migration 19): the one place that holds its SQL. At most one
/// live customer per billing account; deleted ones stay so that late webhooks still find their
/// account. Every function works inside the caller's transaction; errors are the store's.
class StripeCustomerTable {
 public:
  StripeCustomerTable() = delete;

  /// The live customer of `billing_account_id`; nullopt when none.
  static core::Result<std::optional<StripeCustomer>> FindLive(
      store::Transaction& tx, const std::string& billing_account_id);
  /// The customer `customer_id`, live or deleted; nullopt when unknown.
  static core::Result<std::optional<StripeCustomer>> Find(store::Transaction& tx,
                                                          const std::string& customer_id);
  /// Records `c` as live. Errors: a unique violation when the account has a live one already.
  static core::Result<void> Insert(store::Transaction& tx, const StripeCustomer& c);
  /// Marks `customer_id` deleted at `now` (Unix seconds). True when a live row changed.
  static core::Result<bool> MarkDeleted(store::Transaction& tx, const std::string& customer_id,
                                        int64_t now);
};

}  // namespace gpuwerk::billing
