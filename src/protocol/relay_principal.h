#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpuwerk::protocol {

// The certificate principals the relay and the host agents agree on (docs/ssh.md "Upstream: the
// relay credential"). The relay logs in to an instance's sshd with a short-lived OpenSSH user
// certificate (OpenSSH PROTOCOL.certkeys) whose one principal names the instance; the agent writes
// into that instance's authorized_keys a `cert-authority,principals="…"` line (sshd(8),
// AUTHORIZED_KEYS FILE FORMAT) that names the same principal, so a certificate made for one
// instance opens no other. Pure and thread-safe.

/// What every instance principal starts with.
inline constexpr std::string_view kRelayInstancePrincipalPrefix = "gpuwerk-instance-";

/// The principal of the relay's probe certificate: a certificate for a key whose private half
/// nobody keeps, which the agents offer (never sign with) to ask a container's sshd whether it
/// still takes the relay CA's certificates. Containers accept it only on a line restricted to
/// `restrict,command="/bin/false"`.
inline constexpr std::string_view kRelayProbePrincipal = "gpuwerk-relay-probe";

/// The longest instance id a principal is made from.
inline constexpr size_t kMaxPrincipalInstanceId = 64;

/// `gpuwerk-instance-<instance_id>`, the principal of the relay's certificates for that instance.
/// Only ids of 1–64 characters from `[A-Za-z0-9_.-]` make one (the server's ids are `ins_` and
/// base32): anything else could end sshd's `principals="…"` option or name several principals
/// (a comma), so it makes none (nullopt), and no certificate or authorized_keys line is made
/// for it.
std::optional<std::string> RelayInstancePrincipal(std::string_view instance_id);

}  // namespace gpuwerk::protocol
