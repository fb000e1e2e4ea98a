#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::auth {

/// One row of `sign_in_sessions` (migration 1): a browser's sign-in session, known by the
/// SHA-256 of its cookie secret.
struct SignInSessionRow {
  std::string token_hash;  ///< hex SHA-256 of the cookie secret (auth::TokenHash)
  std::string person_id;
  int64_t created_at = 0;  ///< Unix seconds
  int64_t expires_at = 0;  ///< Unix seconds
  std::string source_address;
};

/// The `sign_in_sessions` table: the one place that holds its SQL. Every function works inside
/// the caller's transaction; errors are the store's. Stateless.
class SignInSessionTable {
 public:
  SignInSessionTable() = delete;

  /// Stores a new sign-in session.
  static core::Result<void> Insert(store::Transaction& tx, const SignInSessionRow& row);
  /// The sign-in session with this hash, expired or not; nullopt when none.
  static core::Result<std::optional<SignInSessionRow>> Find(store::Transaction& tx,
                                                            const std::string& token_hash);
  /// The sign-in session with this hash when it expires after `now` (Unix seconds); nullopt
  /// when none or expired.
  static core::Result<std::optional<SignInSessionRow>> FindUnexpired(store::Transaction& tx,
                                                                     const std::string& token_hash,
                                                                     int64_t now);
  /// Deletes the sign-in session with this hash. True when a row went.
  static core::Result<bool> Delete(store::Transaction& tx, const std::string& token_hash);
  /// Deletes every sign-in session of `person_id` except the one whose hash is `keep_hash` (""
  /// keeps none). Returns how many went.
  static core::Result<int64_t> DeleteAllOf(store::Transaction& tx, const std::string& person_id,
                                           const std::string& keep_hash = "");
};

}  // namespace gpuwerk::auth
