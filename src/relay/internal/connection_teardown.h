#pragma once

// Include only from .cc files of src/relay (libssh types).

#include <string>

#include "relay/internal/channel_forwarding.h"
#include "relay/internal/relay_connection.h"
#include "relay/internal/ssh_handles.h"
#include "relay/relay_session_log.h"

namespace gpuwerk::relay::internal {

/// The libssh handles of one connection; TearDown releases them in order.
struct ConnectionHandles {
  SshSessionPtr client;          ///< the accepted client session
  SshEventPtr event;             ///< polls `client`, the wake fd and, once added, `upstream`
  SshSessionPtr upstream;        ///< the instance's sshd, once logged in
  bool upstream_polled = false;  ///< `upstream` was added to `event`
};

/// Why a relay session ended (RelaySessionRecord::end_reason) when the relay did not close it
/// itself (then the reason given to ConnectionControl::RequestClose is recorded).
inline constexpr char kEndClientClosed[] = "client closed";
inline constexpr char kEndInstanceClosed[] = "instance closed";
inline constexpr char kEndConnectionError[] = "connection error";  ///< libssh kept failing

/// What the person reads when the relay closes their relay session for `reason`: on the open
/// session channels' stderr and as the SSH disconnect message (OpenSSH prints both).
std::string CloseNotice(const std::string& reason);

/// Ends one connection, in this order:
/// 1. gives the client at most 2 s (blocking) to take what is queued (a notice, channel closes);
/// 2. closes the channels the client has not closed and frees every channel pair
///    (`forwarding`: null when no relay session started);
/// 3. when the relay session started (`record` non-null), records its end through
///    RelaySessionLog::OnEnd, exactly once: `end_reason` ("ended" when empty) and the bytes
///    `forwarding` carried;
/// 4. frees the event, the upstream session and the client session (each disconnected first);
///    `control.client_fd` is -1 before the client's socket closes;
/// 5. when the client logged in (`control.authenticated`), closes its socket gracefully: FIN after
/// the disconnect (shutdown SHUT_WR), then
///    reads and discards what the client still sends for at most 500 ms (4 MiB) until it closes,
///    then closes, so that no RST makes the client's kernel drop the notice unread.
void TearDown(ConnectionHandles& handles, ChannelForwarding* forwarding, RelaySessionRecord* record,
              const std::string& end_reason, RelaySessionLog& log, ConnectionControl& control);

}  // namespace gpuwerk::relay::internal
