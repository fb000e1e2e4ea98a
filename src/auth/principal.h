#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuwerk::auth {

/// How a request proved who it is.
enum class CredentialKind { kSignInSession, kApiToken };

/// The authenticated caller of a request.
struct Principal {
  std::string person_id;
  std::string email;
  bool is_operator = false;
  /// Whether the person's address is proven (docs/accounts.md "Address proof"): routes that cost
  /// or grant access refuse unproven accounts with 403 email_unverified.
  bool email_proven = false;
  CredentialKind via = CredentialKind::kSignInSession;
  std::string credential_id;  ///< the sign-in session's token hash, or the API token's id
  /// API tokens: the token's last recorded use (Unix seconds, kept to the minute), 0 when never
  /// (AccountService::RecordApiTokenUse decides from it whether to record this one).
  int64_t token_last_used_at = 0;
};

/// A person's account as the API shows it.
struct Person {
  std::string id;
  std::string email;
  bool is_operator = false;
  bool has_password = false;
  int64_t created_at = 0;  ///< Unix seconds
  /// When the person proved their address by a mailed link (Unix seconds); nullopt while
  /// unproven. The bootstrap operator and accounts older than migration 9 count as proven.
  std::optional<int64_t> email_proven_at;
};

}  // namespace gpuwerk::auth
