#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::auth {

/// What a link token is for (R-1; docs/accounts.md "Links"); stored as its name. kAddressProof
/// (sign-up) and kInvite (an operator's invitation) prove a new account's address and set its
/// password.
enum class LinkPurpose { kMagicLink, kPasswordReset, kAddressProof, kInvite };

/// The stored name of `purpose`: "magic_link", "password_reset", "address_proof" or "invite".
std::string_view LinkPurposeName(LinkPurpose purpose);

/// One row of `link_tokens` (migration 1): a mailed single-use link, known by the SHA-256 of its
/// secret.
struct LinkTokenRow {
  std::string token_hash;  ///< hex SHA-256 of the secret (auth::TokenHash)
  std::string person_id;
  LinkPurpose purpose = LinkPurpose::kMagicLink;
  int64_t created_at = 0;  ///< Unix seconds
  int64_t expires_at = 0;  ///< Unix seconds
};

/// The `link_tokens` table: the one place that holds its SQL. Every function works inside the
/// caller's transaction; errors are the store's. Stateless.
class LinkTokenTable {
 public:
  LinkTokenTable() = delete;

  /// Stores a new, unused link token.
  static core::Result<void> Insert(store::Transaction& tx, const LinkTokenRow& row);
  /// Marks the unused, unexpired (expires_at > `now`) token with this hash and purpose as used
  /// at `now`, and returns its person's id; nullopt when there is no such token. Single use:
  /// of concurrent consumers exactly one gets the person.
  static core::Result<std::optional<std::string>> Consume(store::Transaction& tx,
                                                          const std::string& token_hash,
                                                          LinkPurpose purpose, int64_t now);
  /// Whether an unused, unexpired (expires_at > `now`) token with this hash and purpose exists;
  /// changes nothing (Consume decides, in the writing transaction).
  static core::Result<bool> IsUsable(store::Transaction& tx, const std::string& token_hash,
                                     LinkPurpose purpose, int64_t now);
  /// Voids (deletes) every unused link token of `person_id`, of `purpose` only when given.
  /// Returns how many went.
  static core::Result<int64_t> VoidUnused(store::Transaction& tx, const std::string& person_id,
                                          std::optional<LinkPurpose> purpose = std::nullopt);
};

}  // namespace gpuwerk::auth
