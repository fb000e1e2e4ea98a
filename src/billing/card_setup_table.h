#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// A card setup a person began (docs/billing.md "Card setups"): the provider's page (Stripe's
/// Checkout Session `cs_…`) is for one billing account and was asked for by one person, who
/// must still manage that account when the provider says it completed.
struct CardSetupRecord {
  std::string provider_ref;        ///< the provider's id of the page (Stripe "cs_…"); the key
  std::string billing_account_id;  ///< BillingAccount::id it was begun for
  std::string person_id;           ///< who began it ("per_…")
  /// "open" (may still put a card on file), "used" (its completion was decided: applied or
  /// refused), "void" (the account's card was changed here after it began: its card is not
  /// put on file).
  std::string state;
  int64_t created_at = 0;  ///< Unix seconds, our clock
};

/// The `card_setups` table (migration 25): the one place that holds its SQL. Every function
/// works inside the caller's transaction; errors are the store's. Stateless.
class CardSetupTable {
 public:
  CardSetupTable() = delete;

  /// Records `setup` (state "open").
  static core::Result<void> Insert(store::Transaction& tx, const CardSetupRecord& setup);
  /// The setup of `provider_ref`; nullopt when gpuwerk began none by that id.
  static core::Result<std::optional<CardSetupRecord>> Find(store::Transaction& tx,
                                                           const std::string& provider_ref);
  /// Moves `provider_ref` from "open" to `state` ("used", "void"). True when it was open.
  static core::Result<bool> Close(store::Transaction& tx, const std::string& provider_ref,
                                  const std::string& state);
  /// Voids every open setup of `billing_account_id` (its card was changed here: a page begun
  /// before never overrides that change). How many were open.
  static core::Result<int64_t> VoidOpen(store::Transaction& tx,
                                        const std::string& billing_account_id);
};

}  // namespace gpuwerk::billing
