#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::auth {

/// A personal API token as listed (the secret is never listed).
struct ApiToken {
  std::string id;
  std::string name;
  std::string prefix;  ///< the first characters of the secret, to tell tokens apart
  int64_t created_at = 0;
  std::optional<int64_t> last_used_at;
  std::optional<int64_t> expires_at;  ///< Unix seconds; nullopt: never expires (migration 8)
};

/// One row of `api_tokens` (migration 1): a token, whose it is, and the SHA-256 of its secret.
struct ApiTokenRow {
  ApiToken token;
  std::string person_id;
  std::string token_hash;  ///< hex SHA-256 of the secret (auth::TokenHash)
};

/// An API token found by its secret's hash, with what authentication needs of the person it
/// belongs to (ApiTokenTable::FindHolder).
struct ApiTokenHolder {
  std::string token_id;
  std::optional<int64_t> last_used_at;  ///< Unix seconds; nullopt: never used
  std::optional<int64_t> expires_at;    ///< Unix seconds; nullopt: never expires
  std::string person_id;
  std::string email;
  bool is_operator = false;
  bool email_proven = false;  ///< the person's `email_proven_at` is set
};

/// The `api_tokens` table: the one place that holds its SQL. Every function works inside the
/// caller's transaction; errors are the store's. Stateless.
class ApiTokenTable {
 public:
  ApiTokenTable() = delete;

  /// Stores a new token. Errors: the store's unique violation (kAlreadyExists)
  /// when the person has a token of this name (or the hash is taken).
  static core::Result<void> Insert(store::Transaction& tx, const ApiTokenRow& row);
  /// The token whose secret hashes to `token_hash` and its person, in one statement (a join with
  /// `persons`, which auth/person_table.h owns; read only): every API-token request asks this.
  /// nullopt when there is no such token (or, which the schema's foreign key rules out, no such
  /// person).
  static core::Result<std::optional<ApiTokenHolder>> FindHolder(store::Transaction& tx,
                                                                const std::string& token_hash);
  /// `person_id`'s tokens, oldest first (created_at, id).
  static core::Result<std::vector<ApiToken>> ListOf(store::Transaction& tx,
                                                    const std::string& person_id);
  /// Sets last_used_at of token `id` to `now` (Unix seconds).
  static core::Result<void> Touch(store::Transaction& tx, const std::string& id, int64_t now);
  /// Deletes token `id` of `person_id`. True when a row went.
  static core::Result<bool> Delete(store::Transaction& tx, const std::string& person_id,
                                   const std::string& id);
  /// Deletes every token of `person_id` except the one with id `keep_id` ("" keeps none).
  /// Returns how many went.
  static core::Result<int64_t> DeleteAllOf(store::Transaction& tx, const std::string& person_id,
                                           const std::string& keep_id = "");
};

}  // namespace gpuwerk::auth
