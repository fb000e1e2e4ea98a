#pragma once

#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::keys {

/// One challenge a person asked for to claim a public key (docs/ssh-keys.md "Proof of
/// possession").
struct KeyClaimChallenge {
  std::string id;
  std::string person_id;
  std::string fingerprint;  ///< the key it is for ("SHA256:…")
  std::string challenge;    ///< the exact text to sign
  int64_t created_at = 0;   ///< Unix seconds
  int64_t expires_at = 0;   ///< Unix seconds; not usable from then on
};

/// The `key_claim_challenges` table: the one place that holds its SQL. Every function works
/// inside the caller's transaction; errors are the store's. Stateless.
class KeyClaimTable {
 public:
  KeyClaimTable() = delete;
  static core::Result<void> Insert(store::Transaction& tx, const KeyClaimChallenge& challenge);
  /// The unused, unexpired challenge of `person_id` whose text is `challenge`; nullopt otherwise.
  static core::Result<std::optional<KeyClaimChallenge>> FindUsable(store::Transaction& tx,
                                                                   const std::string& person_id,
                                                                   const std::string& challenge,
                                                                   int64_t now);
  /// Marks challenge `id` used at `now`. False when it was used already (single use: of two
  /// claims with one challenge, one gets true).
  static core::Result<bool> Use(store::Transaction& tx, const std::string& id, int64_t now);
  /// How many usable challenges `person_id` holds at `now`.
  static core::Result<int64_t> CountUsable(store::Transaction& tx, const std::string& person_id,
                                           int64_t now);
  /// Deletes `person_id`'s challenges that expired before `now` or were used.
  static core::Result<void> DeleteSpent(store::Transaction& tx, const std::string& person_id,
                                        int64_t now);
};

}  // namespace gpuwerk::keys
