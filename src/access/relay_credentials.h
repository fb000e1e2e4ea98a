#pragma once

#include <string>
#include <string_view>

#include "access/relay_credential_table.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "sched/page.h"
#include "store/database.h"

namespace gpuwerk::access {

/// What every relay credential's secret starts with (`Authorization: Bearer gwr_…`), as host
/// tokens start with "gwh_" and API tokens with "gwt_".
inline constexpr std::string_view kRelayCredentialPrefix = "gwr_";
/// The relay name of `gpuwerk up`'s own relay; an operator cannot register it.
inline constexpr std::string_view kLocalRelayName = "local";
/// The longest relay name, in characters (protocol::RelaySessionReport's `relay` bound).
inline constexpr size_t kMaxRelayNameLength = 128;

/// Whether `bearer` has the form of a relay credential's secret (the prefix only; nothing is
/// looked up). The route table uses it to refuse a relay credential wherever else it is shown.
bool LooksLikeRelayCredential(std::string_view bearer);

/// Checks a relay name an operator registers: 1 to kMaxRelayNameLength characters of a–z, 0–9,
/// '.', '_' and '-', starting with a letter or digit (a host name in lower case fits), and not
/// kLocalRelayName. Errors: kInvalidArgument invalid_name (empty, too long, another character: a
/// control character, a blank, an upper-case letter), reserved_name (`local`). Pure.
core::Result<void> CheckRelayName(std::string_view name);

/// A relay credential just issued, with its secret, which is shown once and stored hashed.
struct NewRelayCredential {
  RelayCredential credential;
  std::string secret;  ///< "gwr_" + 256 random bits, base64url (core::RandomToken)
};

/// One page of relay credentials, by name.
using RelayCredentialPage = sched::Page<RelayCredential>;

/// The relays a server accepts (docs/ssh.md "The relay's API credential"; issue 12 finding 8): each
/// remote `gpuwerk relay` authenticates with a credential of its own that opens the relay's
/// routes (`/api/v1/relay/*`) and nothing else, as a host agent's token opens only the agent's.
/// The credential names the relay: its relay sessions are recorded under that name, so a relay
/// cannot report as another. Secrets are stored as their SHA-256 (auth::TokenHash). Every change
/// is audited in its own transaction: `relay_credential.add`, `.revoke`, `.rotate`
/// (actor, target the credential's id, detail name and prefix, source address).
///
/// Thread-safe (state lives in the store).
class RelayCredentials {
 public:
  RelayCredentials(store::Database& db, core::Clock& clock, core::Rng& rng)
      : db_(db), clock_(clock), rng_(rng) {}

  /// Registers relay `name` (CheckRelayName) for operator `actor_id` and returns its secret.
  /// Errors: invalid_name, reserved_name; kAlreadyExists name_taken (409); the store's. Nothing
  /// is stored on an error.
  core::Result<NewRelayCredential> Add(const std::string& actor_id, std::string_view name,
                                       const std::string& source_address);
  /// `gpuwerk up`'s own relay: registers kLocalRelayName (the system as actor) if absent, or gives
  /// it a new secret (the old one stops working at once), so that no secret is kept on disk
  /// between runs. Audited `relay_credential.add` or `.rotate`. Errors: the store's.
  core::Result<NewRelayCredential> IssueLocal(const std::string& source_address);
  /// The credentials by name, 15 a page (`page` is 1-based). Errors: invalid_page.
  core::Result<RelayCredentialPage> List(int page);
  /// Revokes relay `name`'s credential: its secret stops working with the commit (the relay's
  /// next request gets 401), and the name may be registered again. Returns the credential as it
  /// was. Errors: not_found; the store's.
  core::Result<RelayCredential> Revoke(const std::string& actor_id, std::string_view name,
                                       const std::string& source_address);
  /// The credential whose secret is `secret`; records its use (last_used_at, at most once a
  /// minute). Errors: kUnauthenticated "unauthenticated" (not a relay credential's form, unknown,
  /// or revoked); the store's.
  core::Result<RelayCredential> Authenticate(std::string_view secret);

 private:
  /// A fresh secret and its hash and prefix.
  struct Secret {
    std::string secret, hash, prefix;
  };
  Secret NewSecret();

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
};

}  // namespace gpuwerk::access
