#include "relay/internal/connection_teardown.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <mutex>

#include "relay/internal/libssh_calls.h"

namespace gpuwerk::relay::internal {
namespace {

/// How long a closed connection's socket is drained after our FIN, and how much is read at most.
constexpr auto kDrainTime = std::chrono::milliseconds(500);
constexpr size_t kDrainBytes = 4 * 1024 * 1024;

/// Closes a TCP socket gracefully: FIN after what is queued (shutdown SHUT_WR), then reads and
/// discards what the client still sends until it closes too, `kDrainTime` passes or `kDrainBytes`
/// were read, then closes. Closing with unread data in the receive buffer would send a RST, and a
/// RST makes the client's kernel drop what it has not read yet: the close notice and the
/// SSH_MSG_DISCONNECT (the client then ends on "Broken pipe" or "Connection reset" instead).
void CloseGracefully(int fd) {
  ::shutdown(fd, SHUT_WR);
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + kDrainTime;
  size_t drained = 0;
  char buf[16 * 1024];
  while (drained < kDrainBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // the client closed (or the connection is gone)
    drained += static_cast<size_t>(n);
  }
  ::close(fd);
}

}  // namespace

std::string CloseNotice(const std::string& reason) {
  return "gpuwerk: relay session closed: " + reason;
}

void TearDown(ConnectionHandles& handles, ChannelForwarding* forwarding, RelaySessionRecord* record,
              const std::string& end_reason, RelaySessionLog& log, ConnectionControl& control) {
  // Flush what is queued (the notice, closes) with a short bound; a stalled client costs this
  // thread at most that long.
  if (handles.client != nullptr && IsConnected(handles.client.get())) {
    ssh_set_blocking(handles.client.get(), 1);
    SetTimeout(handles.client.get(), std::chrono::milliseconds(2000));
  }
  if (forwarding != nullptr) forwarding->CloseAll();
  if (record != nullptr) {
    record->ended_at = std::chrono::system_clock::now();
    record->end_reason = end_reason.empty() ? "ended" : end_reason;
    if (forwarding != nullptr) {
      record->bytes_from_client = forwarding->bytes().from_client;
      record->bytes_to_client = forwarding->bytes().to_client;
    }
    log.OnEnd(*record);
    spdlog::info("relay: relay session {} ended ({}): {} bytes in, {} bytes out", control.id,
                 record->end_reason, record->bytes_from_client, record->bytes_to_client);
  }
  if (handles.event != nullptr) {
    ssh_event_remove_fd(handles.event.get(), control.wake_fd);
    if (handles.client != nullptr) {
      ssh_event_remove_session(handles.event.get(), handles.client.get());
    }
    if (handles.upstream != nullptr && handles.upstream_polled) {
      ssh_event_remove_session(handles.event.get(), handles.upstream.get());
    }
    handles.event.reset();
  }
  handles.upstream.reset();
  if (handles.client != nullptr) {
    {
      std::lock_guard lock(control.mu);
      control.client_fd = -1;
    }
    // libssh closes its descriptor right after the SSH_MSG_DISCONNECT; a duplicate keeps the
    // socket open so that it can be closed gracefully after that. Only for a person who logged
    // in (they get a notice); a connection that never did is cut as before, so that silent
    // clients cost nothing more.
    const socket_t fd = ssh_get_fd(handles.client.get());
    const int kept = fd >= 0 && control.authenticated ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    handles.client.reset();
    if (kept >= 0) CloseGracefully(kept);
  }
}

}  // namespace gpuwerk::relay::internal
