#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "protocol/relay_messages.h"

namespace gpuwerk::protocol {

// How the relay's SSH user name names an instance, and the one routing rule over the instances a
// key reaches (docs/ssh.md "The user name"). Shared by the server's access decision
// (access::RelayAccess, in process under `gpuwerk up` and behind `POST /api/v1/relay/authorize`)
// and the relay's in-memory authorizer for tests, so both decide alike. Pure and thread-safe.

/// An SSH user name as the relay reads it:
///   `<hostname>`          → that instance, login `root`
///   `<login>+<hostname>`  → that instance, that Linux login
///   `<login>`             → no instance: refused, saying to use the hostname (R-9: a bare user
///                           name never picks an instance by key)
/// A bare word shaped like an instance hostname (`<name>-<5 chars of [a-z2-7]>`, as sched makes
/// them) is always read as a hostname, never as a login.
struct RelayUser {
  std::string
      login;  ///< the Linux login; kDefaultLogin for a bare hostname; empty for a bare login
  std::string hostname;    ///< the instance hostname; empty for a bare login
  std::string bare_login;  ///< set only for a bare login (always refused, with the forms to use)
};

/// True for `<name>-<5 chars of [a-z2-7]>` within a DNS label: the shape of instance hostnames.
bool LooksLikeInstanceHostname(std::string_view word);

/// The login used when the user name names only the instance.
inline constexpr std::string_view kDefaultLogin = "root";

/// The longest SSH user name the relay reads, in bytes: a login (at most 32) + '+' + a hostname
/// (a DNS label, at most 63) fits with room to spare. The relay refuses a longer one itself,
/// before it asks the authorizer (CheckRelayUserLength), and ParseRelayUser refuses it too.
inline constexpr size_t kMaxRelayUserBytes = 128;

/// Whether `user` is longer than kMaxRelayUserBytes. Errors: kInvalidArgument
/// `invalid_relay_user`, with a message for the person that says what is accepted (and does not
/// repeat the name).
core::Result<void> CheckRelayUserLength(std::string_view user);

/// Splits and validates a user name. Logins follow POSIX portable user names
/// (`[a-z_][a-z0-9_.-]{0,31}`, a trailing `$` not allowed here); hostnames are DNS labels
/// (`[a-z0-9-]{1,63}`, no leading or trailing `-`). Upper case is folded to lower case.
/// Errors: kInvalidArgument `invalid_relay_user` with a message that says what is accepted.
core::Result<RelayUser> ParseRelayUser(std::string_view user);

/// One live instance that the offered key reaches (the key is attached to it).
struct RelayCandidate {
  std::string instance_id;
  std::string name;      ///< e.g. "alpha"
  std::string hostname;  ///< e.g. "alpha-k3x7q" (globally unique)
  /// Who is logging in: the offered key's owner (a key belongs to one account at most, and an
  /// instance holds only its owner's keys, so this is also the instance's owner).
  std::string person_id;
  std::string upstream_host = "127.0.0.1";
  uint16_t upstream_port = 22;
  /// The sshd host key the relay must find there ("SHA256:…"); "" when none is pinned.
  std::string upstream_host_key_fingerprint;
};

/// The routing rule: a hostname must be among `reachable` (the live instances the request's key
/// is attached to); a bare login is refused, however many instances the key reaches, with a
/// message that says to use the hostname. Everything else is refused with a message
/// for the person that lists only `reachable` (the client has proven it holds the key, so it may
/// learn where the key leads, and nothing else).
RelayAuthorizeDecision DecideRelayLogin(const RelayAuthorizeRequest& request,
                                        std::vector<RelayCandidate> reachable);

}  // namespace gpuwerk::protocol
