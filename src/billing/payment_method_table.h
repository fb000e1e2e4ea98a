#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// A billing account's payment method as stored: never a card number, only what a person
/// recognises their card by. One per billing account.
struct PaymentMethod {
  std::string billing_account_id;  ///< BillingAccount::id ("solo_per_…", a team's id)
  std::string provider;      ///< the PaymentProvider::name() that holds it: "manual", "stripe"
  std::string brand;         ///< lowercase, e.g. "visa"; the provider's word for the method
  std::string last4;         ///< the card number's last 4 digits; "" when the provider gives none
  int64_t exp_month = 0;     ///< 1..12; 0 when the provider gives no expiry
  int64_t exp_year = 0;      ///< four digits, e.g. 2030; 0 when the provider gives no expiry
  std::string provider_ref;  ///< the provider's id for it (Stripe "pm_…"); "" for manual
  int64_t created_at = 0;    ///< Unix seconds: first recorded for this account
  int64_t updated_at = 0;    ///< Unix seconds: last replaced
};

/// The `payment_methods` table (docs/billing.md): the one place that holds its SQL. Keyed by
/// billing_account_id, so an account has one method at most. Every function works inside the
/// caller's transaction; errors are the store's. Stateless.
class PaymentMethodTable {
 public:
  PaymentMethodTable() = delete;

  /// The method on file for `billing_account_id`; nullopt when none.
  static core::Result<std::optional<PaymentMethod>> Find(store::Transaction& tx,
                                                         const std::string& billing_account_id);
  /// The method on file whose provider is `provider` and provider_ref is `provider_ref` (a
  /// provider's webhook names its own id); nullopt when none.
  static core::Result<std::optional<PaymentMethod>> FindByProviderRef(
      store::Transaction& tx, const std::string& provider, const std::string& provider_ref);
  /// The billing accounts whose method on file is held by `provider` (e.g. "manual": the ones
  /// the operator collects from itself), in one statement.
  static core::Result<std::set<std::string>> AccountsOfProvider(store::Transaction& tx,
                                                                const std::string& provider);
  /// Whether `billing_account_id` has a method on file (one indexed read: the launch gate).
  static core::Result<bool> Exists(store::Transaction& tx, const std::string& billing_account_id);
  /// Stores `m` as its account's method, replacing the one on file (keeping that one's
  /// created_at; `m.created_at` is used only for a first method). `m.updated_at` is stored as
  /// given.
  static core::Result<void> Upsert(store::Transaction& tx, const PaymentMethod& m);
  /// Removes the method of `billing_account_id`. True when a row went.
  static core::Result<bool> Delete(store::Transaction& tx, const std::string& billing_account_id);
};

}  // namespace gpuwerk::billing
