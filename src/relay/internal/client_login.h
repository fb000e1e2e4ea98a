#pragma once

// Include only from .cc files of src/relay (libssh types).

#include <chrono>
#include <optional>

#include "relay/internal/relay_connection.h"
#include "relay/internal/ssh_handles.h"
#include "relay/relay_authorizer.h"

namespace gpuwerk::relay::internal {

/// A client's successful login: who was let in, where to, and the upstream session the relay
/// opened for them.
struct ClientLogin {
  AuthorizeRequest request;  ///< what was authorized (asked again by re-authorization)
  RelayTarget target;
  SshSessionPtr upstream;  ///< logged in to the target's sshd, still blocking
};

/// Runs the client's user authentication (RFC 4252) after key exchange, polling `event` (which
/// polls `client`, non-blocking, and the connection's wake fd) until a signed public-key login is
/// let in: answers every public-key query with PK_OK, asks the authorizer on the signed attempt,
/// logs in upstream (upstream_login.h), and refuses with a banner and a failure otherwise
/// (recorded through RelaySessionLog::OnRefused). Other methods fail and count, like bad
/// signatures, towards `max_auth_tries` (then the client is disconnected) and the source's
/// failure limit. On success it answers the client, and marks `control` authenticated with the
/// target's instance and person. Returns nothing when the client left, a close was requested,
/// `deadline` passed or too many attempts failed.
std::optional<ClientLogin> LogInClient(ssh_session client, ssh_event event,
                                       std::chrono::steady_clock::time_point deadline,
                                       const ConnectionContext& context,
                                       ConnectionControl& control);

}  // namespace gpuwerk::relay::internal
