#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "keys/ssh_key_registry.h"
#include "store/database.h"

namespace gpuwerk::keys {

/// The `ssh_keys` table (migration 1; one account per key from migration 10): the one place that
/// holds its SQL. Rows map to SshKey in one place and are read by column name. Every function works
/// inside the caller's transaction; errors are the store's. Stateless.
class SshKeyTable {
 public:
  SshKeyTable() = delete;

  /// Key `id` of any person; nullopt when absent.
  static core::Result<std::optional<SshKey>> Find(store::Transaction& tx, const std::string& id);
  /// Key `id` when it belongs to `person_id`; nullopt otherwise.
  static core::Result<std::optional<SshKey>> FindOwned(store::Transaction& tx,
                                                       const std::string& person_id,
                                                       const std::string& id);
  /// A key of `person_id` with this name or this fingerprint (R-4 uniqueness); nullopt if none.
  static core::Result<std::optional<SshKey>> FindClash(store::Transaction& tx,
                                                       const std::string& person_id,
                                                       const std::string& name,
                                                       const std::string& fingerprint);
  /// The key whose fingerprint is `fingerprint` ("SHA256:…"), of whichever person holds it (a
  /// public key belongs to one account at most: R-4, the unique index `ssh_keys_one_account` of
  /// migration 10); nullopt when no account has it.
  static core::Result<std::optional<SshKey>> FindByFingerprint(store::Transaction& tx,
                                                               const std::string& fingerprint);
  /// Stores `key` (its person_id included). A name or key the person has already, or a key on
  /// another account, is a unique violation (store::IsUniqueViolation).
  static core::Result<void> Insert(store::Transaction& tx, const SshKey& key);
  /// Records that key `id`'s account proved it holds the private key, at `now` (kept if it had).
  static core::Result<void> MarkProven(store::Transaction& tx, const std::string& id, int64_t now);
  /// `person_id`'s keys oldest first: `limit` of them from `offset` on, and the person's total.
  static core::Result<std::pair<std::vector<SshKey>, int64_t>> ListPage(
      store::Transaction& tx, const std::string& person_id, int64_t limit, int64_t offset);
  /// Deletes key `id` of `person_id`. True when a row went.
  static core::Result<bool> Delete(store::Transaction& tx, const std::string& person_id,
                                   const std::string& id);
  /// Deletes every key of `person_id` (an unproven account claimed by its mailbox's owner,
  /// docs/accounts.md "Address proof"; such an account has no instance to hold a key). Returns
  /// how many went.
  static core::Result<int64_t> DeleteAllOf(store::Transaction& tx, const std::string& person_id);
};

}  // namespace gpuwerk::keys
