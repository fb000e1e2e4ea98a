#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::relay {

/// An SSH user name as the relay reads it (docs/ssh.md):
///   `<hostname>`          → that instance, login `root`
///   `<login>+<hostname>`  → that instance, that Linux login
///   `<login>`             → the one live instance the offered key reaches (refused when 0 or ≥ 2)
/// A bare word shaped like an instance hostname (`<name>-<5 chars of [a-z2-7]>`, as sched makes
/// them) is always read as a hostname, never as a login, so that a mistyped or foreign hostname
/// is refused as such instead of landing on the person's only instance under a strange login.
struct RelayUser {
  std::string
      login;  ///< the Linux login; kDefaultLogin for a bare hostname; empty for a bare login
  std::string hostname;    ///< the instance hostname; empty for a bare login
  std::string bare_login;  ///< set only for a bare login (route by key: exactly one instance)
};

/// True for `<name>-<5 chars of [a-z2-7]>` within a DNS label: the shape of instance hostnames.
bool LooksLikeInstanceHostname(std::string_view word);

/// The login used when the user name names only the instance.
inline constexpr std::string_view kDefaultLogin = "root";

/// Splits and validates a user name. Logins follow POSIX portable user names
/// (`[a-z_][a-z0-9_.-]{0,31}`, a trailing `$` not allowed here); hostnames are DNS labels
/// (`[a-z0-9-]{1,63}`, no leading or trailing `-`). Upper case is folded to lower case.
/// Errors: kInvalidArgument `invalid_relay_user` with a message that says what is accepted.
core::Result<RelayUser> ParseRelayUser(std::string_view user);

}  // namespace gpuwerk::relay
