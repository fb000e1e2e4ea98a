#include "relay/internal/relay_connection.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/strings.h"
#include "relay/internal/channel_forwarding.h"
#include "relay/internal/client_login.h"
#include "relay/internal/connection_teardown.h"
#include "relay/internal/libssh_calls.h"

namespace gpuwerk::relay::internal {

void ConnectionControl::RequestClose(const std::string& reason) {
  {
    std::lock_guard lock(mu);
    if (close_reason.empty()) close_reason = reason;
  }
  close_requested = true;
  const uint64_t one = 1;
  if (wake_fd >= 0) [[maybe_unused]]
    auto n = ::write(wake_fd, &one, sizeof one);
}

void ConnectionControl::ShutdownSocket() {
  std::lock_guard lock(mu);
  if (client_fd >= 0) ::shutdown(client_fd, SHUT_RDWR);
}

namespace {

using SteadyClock = std::chrono::steady_clock;

/// The window libssh grants a channel (libssh 0.10 channels.c WINDOWBASE; 0.11 WINDOW_DEFAULT).
constexpr size_t kLibsshWindow =
    LIBSSH_VERSION_INT >= SSH_VERSION_INT(0, 11, 0) ? 64 * 32'768 : 1'280'000;
/// The largest packet libssh accepts (its MAX_PACKET_LEN).
constexpr size_t kLibsshMaxPacket = 256 * 1024;

/// RelayOptions' per-connection bounds as the forwarding takes them.
ChannelLimits LimitsOf(const RelayOptions& o) {
  ChannelLimits l;
  l.max_channels = static_cast<size_t>(std::max(o.max_channels_per_connection, 0));
  l.max_queued_requests = static_cast<size_t>(std::max(o.max_queued_requests_per_channel, 0));
  l.max_pending_globals = static_cast<size_t>(std::max(o.max_pending_global_requests, 0));
  l.max_buffered = o.max_channel_buffer_bytes > 0 ? o.max_channel_buffer_bytes
                                                  : kLibsshWindow + kLibsshMaxPacket;
  return l;
}

int OnWake(socket_t fd, int /*revents*/, void* /*userdata*/) {
  uint64_t v = 0;
  [[maybe_unused]] auto n = ::read(fd, &v, sizeof v);
  return 0;
}

/// One connection from accept to end: key exchange, the client's login (client_login.h, which
/// logs in upstream), the relay session's forwarding loop, and the teardown
/// (connection_teardown.h) when it is destroyed.
class Connection {
 public:
  Connection(SshSessionPtr client, const ConnectionContext& ctx, ConnectionControl& control)
      : ctx_(ctx), opts_(*ctx.options), control_(control) {
    handles_.client = std::move(client);
  }

  ~Connection() {
    TearDown(handles_, forwarding_ ? &*forwarding_ : nullptr, started_ ? &record_ : nullptr,
             end_reason_, *ctx_.log, control_);
  }

  void Run() {
    const auto accepted_at = SteadyClock::now();
    ssh_session client = handles_.client.get();
    SetTimeout(client, opts_.handshake_timeout);
    ssh_set_auth_methods(client, SSH_AUTH_METHOD_PUBLICKEY);
    if (!KeyExchange(client, accepted_at)) return;
    handles_.event.reset(ssh_event_new());
    if (handles_.event == nullptr) return;
    ssh_set_blocking(client, 0);
    ssh_event_add_session(handles_.event.get(), client);
    ssh_event_add_fd(handles_.event.get(), control_.wake_fd, POLLIN, &OnWake, nullptr);
    auto login =
        LogInClient(client, handles_.event.get(), accepted_at + opts_.login_grace, ctx_, control_);
    if (!login) return;
    request_ = std::move(login->request);
    target_ = std::move(login->target);
    handles_.upstream = std::move(login->upstream);
    Forward();
  }

 private:
  /// The key exchange (RFC 4253 §4.2, §7), driven without blocking so that two deadlines hold:
  /// `banner_timeout` for the client's identification string and `handshake_timeout` for the
  /// whole exchange. False when it failed, timed out or the relay asked the connection to end.
  bool KeyExchange(ssh_session client, SteadyClock::time_point accepted_at) {
    const auto banner_deadline = accepted_at + opts_.banner_timeout;
    const auto deadline = accepted_at + opts_.handshake_timeout;
    const int fd = ssh_get_fd(client);
    ssh_set_blocking(client, 0);
    while (true) {
      const int rc = ssh_handle_key_exchange(client);  // one non-blocking round
      if (rc == SSH_OK) return true;
      if (rc == SSH_ERROR) {
        spdlog::debug("relay: key exchange with {} failed: {}", control_.source_address,
                      core::BoundedPrintable(ssh_get_error(client)));
        return false;
      }
      if (control_.close_requested) return false;
      const bool banner = ssh_get_clientbanner(client) != nullptr;
      if (banner) control_.banner_received = true;
      const auto now = SteadyClock::now();
      if (!banner && now >= banner_deadline) {
        spdlog::debug(
            "relay: closed the connection from {}: no SSH identification string within "
            "{} ms (banner_timeout)",
            control_.source_address, opts_.banner_timeout.count());
        ctx_.limiter->RecordPreAuthTimeout(control_.source_address);
        return false;
      }
      if (now >= deadline) {
        spdlog::debug(
            "relay: closed the connection from {}: key exchange not done within {} ms "
            "(handshake_timeout)",
            control_.source_address, opts_.handshake_timeout.count());
        ctx_.limiter->RecordPreAuthTimeout(control_.source_address);
        return false;
      }
      const auto next = banner ? deadline : std::min(banner_deadline, deadline);
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
      pollfd fds[2] = {
          {fd,
           static_cast<short>(POLLIN |
                              ((ssh_get_poll_flags(client) & SSH_WRITE_PENDING) ? POLLOUT : 0)),
           0},
          {control_.wake_fd, POLLIN, 0}};
      ::poll(fds, 2, static_cast<int>(std::clamp<int64_t>(wait, 1, 1000)));
    }
  }

  void StartRecord() {
    record_.id = control_.record_id;
    record_.relay_session_id = control_.id;
    record_.person_id = target_.person_id;
    record_.key_fingerprint = request_.key_fingerprint;
    record_.instance_id = target_.instance_id;
    record_.hostname = target_.hostname;
    record_.login = target_.login;
    record_.source_address = control_.source_address;
    record_.started_at = std::chrono::system_clock::now();
    ctx_.log->OnStart(record_);
    started_ = true;
    spdlog::info(
        "relay: relay session {} ({}) started: person {} key {} from {} to instance {} as {}",
        control_.id, control_.record_id, target_.person_id, request_.key_fingerprint,
        control_.source_address, target_.instance_id, target_.login);
  }

  /// The relay session: polls both sessions and the wake fd, hands each message to the
  /// forwarding, advances it until a pass finds nothing to do, and ends when the Relay asks
  /// (RequestClose: a re-check refused it, or the relay stops). Returns with `end_reason_` set.
  void Forward() {
    ssh_session client = handles_.client.get();
    ssh_session upstream = handles_.upstream.get();
    ssh_set_blocking(upstream, 0);
    ssh_event_add_session(handles_.event.get(), upstream);
    handles_.upstream_polled = true;
    StartRecord();
    ChannelForwarding& forwarding =
        forwarding_.emplace(client, upstream, LimitsOf(opts_),
                            "relay session " + std::to_string(control_.id) + " (" +
                                control_.record_id + ") from " + control_.source_address);

    int errors = 0;
    while (true) {
      // Re-checks run on the Relay's re-check thread, which asks this loop to end through
      // control_ (RequestClose): nothing here waits for the authorizer.
      if (control_.close_requested) {
        std::string reason;
        {
          std::lock_guard lock(control_.mu);
          reason = control_.close_reason;
        }
        end_reason_ = reason;
        // On the open channels' stderr, and as the disconnect message (OpenSSH prints it), so
        // the person learns why even before a channel is open.
        const std::string notice = CloseNotice(reason);
        forwarding.NotifyClient(notice);
        ssh_session_set_disconnect_message(client, notice.c_str());
        break;
      }
      const int timeout_ms = 500;
      int rc = ssh_event_dopoll(handles_.event.get(), timeout_ms);
      if (rc == SSH_ERROR) {
        if (!IsConnected(client) || !IsConnected(upstream) || ++errors > 100) {
          end_reason_ = !IsConnected(client)     ? kEndClientClosed
                        : !IsConnected(upstream) ? kEndInstanceClosed
                                                 : kEndConnectionError;
          break;
        }
      } else {
        errors = 0;
      }
      // Reading one channel may pull in packets for the others (libssh polls the whole event
      // while reading), so go round until a pass finds nothing to do.
      bool work = true;
      for (int pass = 0; work && pass < 64 && forwarding.violation().empty(); ++pass) {
        work = false;
        while (SshMessagePtr msg{ssh_message_get(client)}) {
          forwarding.OnClientMessage(std::move(msg));
          work = true;
        }
        while (SshMessagePtr msg{ssh_message_get(upstream)}) {
          forwarding.OnUpstreamMessage(std::move(msg));
          work = true;
        }
        work |= forwarding.Progress();
      }
      if (!forwarding.violation().empty()) {
        // A peer went past a bound (RelayOptions): the connection ends before libssh holds more.
        end_reason_ = forwarding.violation();
        spdlog::warn("relay: relay session {} ({}) from {} to instance {} ended: {}", control_.id,
                     control_.record_id, control_.source_address, target_.instance_id, end_reason_);
        const std::string notice = CloseNotice(end_reason_);
        forwarding.NotifyClient(notice);
        ssh_session_set_disconnect_message(client, notice.c_str());
        break;
      }
      forwarding.RemoveFinished();
      if (!IsConnected(client)) {
        end_reason_ = kEndClientClosed;
        break;
      }
      if (!IsConnected(upstream)) {
        end_reason_ = kEndInstanceClosed;
        forwarding.NotifyClient("gpuwerk: the instance closed the connection");
        break;
      }
    }
  }

  ConnectionHandles handles_;
  const ConnectionContext& ctx_;
  const RelayOptions& opts_;
  ConnectionControl& control_;
  AuthorizeRequest request_;  ///< what was authorized
  RelayTarget target_;
  std::optional<ChannelForwarding> forwarding_;  ///< once the relay session started
  bool started_ = false;
  std::string end_reason_;
  RelaySessionRecord record_;
};

}  // namespace

void RunConnection(SshSessionPtr client, const ConnectionContext& context,
                   ConnectionControl& control) {
  Connection c(std::move(client), context, control);
  c.Run();
}

}  // namespace gpuwerk::relay::internal
