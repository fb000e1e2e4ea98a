#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::access {

/// A relay credential as listed (docs/ssh.md "The relay's API credential"): the name a remote
/// `gpuwerk relay` is known by. The secret is never listed.
struct RelayCredential {
  std::string id;      ///< "rly_…"
  std::string name;    ///< the relay's name (CheckRelayName), unique; its relay sessions' `relay`
  std::string prefix;  ///< the secret's first characters ("gwr_" and 8 more), to tell them apart
  /// The operator (person id) who registered it; "" for the system (`gpuwerk up`'s own relay).
  std::string created_by;
  int64_t created_at = 0;               ///< Unix seconds
  std::optional<int64_t> last_used_at;  ///< Unix seconds, recorded at most once a minute
};

/// One row of `relay_credentials` (migration 22): a credential and the SHA-256 of its secret.
struct RelayCredentialRow {
  RelayCredential credential;
  std::string token_hash;  ///< hex SHA-256 of the secret (auth::TokenHash)
};

/// The `relay_credentials` table: the one place that holds its SQL. Every function works inside
/// the caller's transaction; errors are the store's. Stateless.
class RelayCredentialTable {
 public:
  RelayCredentialTable() = delete;

  /// Stores a new credential. Errors: the store's unique violation (kAlreadyExists) when the
  /// name (or the hash) is taken.
  static core::Result<void> Insert(store::Transaction& tx, const RelayCredentialRow& row);
  /// The credential whose secret hashes to `token_hash`; nullopt when none.
  static core::Result<std::optional<RelayCredentialRow>> FindByHash(store::Transaction& tx,
                                                                    const std::string& token_hash);
  /// The credential named `name`; nullopt when none.
  static core::Result<std::optional<RelayCredentialRow>> FindByName(store::Transaction& tx,
                                                                    const std::string& name);
  /// `limit` credentials by name from `offset`, and how many there are in all.
  static core::Result<std::pair<std::vector<RelayCredential>, int64_t>> Page(store::Transaction& tx,
                                                                             int64_t limit,
                                                                             int64_t offset);
  /// Gives credential `id` a new secret (its hash and prefix) and creation time; the old secret
  /// stops working with the commit. True when a row changed.
  static core::Result<bool> Replace(store::Transaction& tx, const std::string& id,
                                    const std::string& token_hash, const std::string& prefix,
                                    int64_t created_at);
  /// Sets last_used_at of credential `id` to `now` (Unix seconds).
  static core::Result<void> Touch(store::Transaction& tx, const std::string& id, int64_t now);
  /// Deletes credential `id`. True when a row went.
  static core::Result<bool> Delete(store::Transaction& tx, const std::string& id);
};

}  // namespace gpuwerk::access
