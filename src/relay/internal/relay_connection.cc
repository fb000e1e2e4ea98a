#include "relay/internal/relay_connection.h"

#include <libssh/callbacks.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "relay/internal/libssh_calls.h"
#include "relay/internal/ssh_handles.h"
#include "relay/internal/upstream_login.h"

// libssh 0.10 marks the pty getters and the public-key state getter deprecated in favour of the
// callback API, but the message API is the one that lets the relay answer a client's request
// after the upstream has answered (see docs/ssh.md "Threading"); they are still supported.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

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

constexpr size_t kChunk = 64 * 1024;

/// One client channel and its upstream twin.
struct ChannelPair {
  enum class Kind {
    kSession,         ///< client → instance, RFC 4254 §6.1
    kDirectTcpip,     ///< client → instance (`ssh -L`, `-W`), §7.2
    kForwardedTcpip,  ///< instance → client (`ssh -R`), §7.2
    kAgent,           ///< instance → client (`ssh -A`), auth-agent@openssh.com
  };
  Kind kind = Kind::kSession;
  /// Opened by the instance side (forwarded-tcpip, agent): `open_msg` came from the upstream and
  /// is answered once the client accepted our open.
  bool reverse = false;
  ssh_channel client = nullptr;    ///< client side; for a forward pair null until opened
  ssh_channel upstream = nullptr;  ///< upstream side; for a reverse pair null until opened
  ssh_message open_msg = nullptr;  ///< the pending open, answered once the other side answers
  std::string dest_host, orig_host;
  int dest_port = 0, orig_port = 0;

  std::deque<ssh_message> requests;  ///< client channel requests, forwarded one at a time
  std::deque<std::string> signals;   ///< client "signal" requests (no reply), to forward
  bool request_in_flight = false;    ///< the head of `requests` was sent upstream, no answer yet
  bool agent_requested = false;      ///< the client sent auth-agent-req@openssh.com
  bool agent_forwarded = false;

  bool client_closed = false;    ///< the client sent CHANNEL_CLOSE
  bool upstream_closed = false;  ///< the upstream sent CHANNEL_CLOSE
  bool eof_sent_upstream = false;
  bool eof_sent_client = false;
  bool done = false;

  std::optional<int> exit_status;
  struct ExitSignal {
    std::string signal, errmsg, lang;
    bool core = false;
  };
  std::optional<ExitSignal> exit_signal;

  ssh_channel_callbacks_struct client_cb{};
  ssh_channel_callbacks_struct upstream_cb{};
};

class Connection {
 public:
  Connection(SshSessionPtr client, const ConnectionContext& ctx, ConnectionControl& control)
      : client_(std::move(client)), ctx_(ctx), opts_(*ctx.options), control_(control) {}

  ~Connection() { Teardown(); }

  void Run() {
    accepted_at_ = SteadyClock::now();
    SetTimeout(client_.get(), opts_.handshake_timeout);
    ssh_set_auth_methods(client_.get(), SSH_AUTH_METHOD_PUBLICKEY);
    if (ssh_handle_key_exchange(client_.get()) != SSH_OK) {
      spdlog::debug("relay: key exchange with {} failed: {}", control_.source_address,
                    ssh_get_error(client_.get()));
      return;
    }
    event_.reset(ssh_event_new());
    if (event_ == nullptr) return;
    ssh_set_blocking(client_.get(), 0);
    ssh_event_add_session(event_.get(), client_.get());
    ssh_event_add_fd(event_.get(), control_.wake_fd, POLLIN, &Connection::OnWake, this);
    if (!Authenticate()) return;
    Forward();
  }

 private:
  static int OnWake(socket_t fd, int /*revents*/, void* /*userdata*/) {
    uint64_t v = 0;
    [[maybe_unused]] auto n = ::read(fd, &v, sizeof v);
    return 0;
  }

  // ---- authentication ----------------------------------------------------------------------

  bool Authenticate() {
    const auto deadline = accepted_at_ + opts_.login_grace;
    while (!authenticated_) {
      if (control_.close_requested || SteadyClock::now() >= deadline || fatal_) return false;
      int rc = ssh_event_dopoll(event_.get(), 200);
      if (rc == SSH_ERROR && !IsConnected(client_.get())) return false;
      while (!authenticated_ && !fatal_) {
        ssh_message msg = ssh_message_get(client_.get());
        if (msg == nullptr) break;
        HandleAuthMessage(msg);
      }
      if (!IsConnected(client_.get())) return false;
    }
    return true;
  }

  void HandleAuthMessage(ssh_message msg) {
    const int type = ssh_message_type(msg);
    if (type == SSH_REQUEST_SERVICE) {
      const char* service = ssh_message_service_service(msg);
      if (service != nullptr && std::string_view(service) == "ssh-userauth") {
        ssh_message_service_reply_success(msg);
      } else {
        ssh_message_reply_default(msg);
      }
    } else if (type == SSH_REQUEST_AUTH) {
      const int method = ssh_message_subtype(msg);
      const char* user = ssh_message_auth_user(msg);
      if (method == SSH_AUTH_METHOD_PUBLICKEY) {
        const auto state = ssh_message_auth_publickey_state(msg);
        if (state == SSH_PUBLICKEY_STATE_NONE) {
          // A query ("would you take this key?"): yes for any key; the decision waits for the
          // signature, so nothing about the key's instances is said to someone who only has its
          // public half.
          ssh_message_auth_reply_pk_ok_simple(msg);
        } else if (state == SSH_PUBLICKEY_STATE_VALID) {
          AuthorizeAndConnect(msg, user ? user : "", ssh_message_auth_pubkey(msg));
        } else {
          Deny(msg, /*count=*/true);  // a signature that does not verify
        }
      } else if (method == SSH_AUTH_METHOD_NONE) {
        Deny(msg, /*count=*/false);  // clients start with "none" to learn the methods
      } else {
        // password, keyboard-interactive, hostbased: refused, and counted.
        spdlog::info("relay: refused a non-publickey login attempt from {}",
                     control_.source_address);
        Deny(msg, /*count=*/true);
      }
    } else {
      ssh_message_reply_default(msg);
    }
    ssh_message_free(msg);
  }

  void Deny(ssh_message msg, bool count = false) {
    ssh_message_auth_set_methods(msg, SSH_AUTH_METHOD_PUBLICKEY);
    ssh_message_reply_default(msg);
    if (count) CountFailure();
  }

  void CountFailure() {
    ctx_.limiter->RecordAuthFailure(control_.source_address);
    if (++auth_failures_ >= opts_.max_auth_tries) {
      ssh_session_set_disconnect_message(client_.get(),
                                         "gpuwerk: too many authentication failures");
      ssh_disconnect(client_.get());
      fatal_ = true;
    }
  }

  void SendBanner(const std::string& text) {
    std::string t = text;
    if (t.empty() || t.back() != '\n') t += '\n';
    SshStringPtr s(ssh_string_from_char(t.c_str()));
    if (s != nullptr) ssh_send_issue_banner(client_.get(), s.get());
  }

  void Refuse(ssh_message msg, const std::string& code, const std::string& message,
              const std::string& user, const std::string& fingerprint, const RelayTarget* target) {
    RelayRefusalRecord r;
    r.code = code;
    r.message = message;
    r.user = user;
    r.key_fingerprint = fingerprint;
    r.source_address = control_.source_address;
    r.at = std::chrono::system_clock::now();
    if (target != nullptr) {
      r.person_id = target->person_id;
      r.instance_id = target->instance_id;
    }
    ctx_.log->OnRefused(r);
    spdlog::info("relay: refused {} from {} key {}: {}", user, control_.source_address, fingerprint,
                 code);
    SendBanner(message);
    Deny(msg, /*count=*/true);
  }

  void AuthorizeAndConnect(ssh_message msg, const std::string& user, ssh_key key) {
    AuthorizeRequest req;
    req.user = user;
    req.source_address = control_.source_address;
    if (key != nullptr) {
      req.key_type =
          ssh_key_type_to_char(ssh_key_type(key)) ? ssh_key_type_to_char(ssh_key_type(key)) : "";
      req.key_blob_base64 = PublicKeyBase64(key);
      req.key_fingerprint = Sha256Fingerprint(key);
    }
    if (req.key_fingerprint.empty()) {
      Deny(msg, true);
      return;
    }
    auto decision = ctx_.authorizer->Authorize(req);
    if (!decision) {
      Refuse(msg, "authorizer_unavailable",
             "gpuwerk: cannot check your access right now (" + decision.error().message +
                 "); please try again in a moment.",
             user, req.key_fingerprint, nullptr);
      return;
    }
    if (!decision->target) {
      Refuse(msg, "not_authorized", decision->refusal, user, req.key_fingerprint, nullptr);
      return;
    }
    const RelayTarget& t = *decision->target;
    auto upstream = LogInUpstream(t, *ctx_.relay_key_private, opts_.upstream_timeout);
    if (!upstream) {
      Refuse(msg, RefusalCode(upstream.error()), RefusalMessage(upstream.error(), t), user,
             req.key_fingerprint, &t);
      return;
    }
    upstream_ = std::move(*upstream);
    ssh_message_auth_reply_success(msg, 0);
    authenticated_ = true;
    request_ = req;
    target_ = t;
    fingerprint_ = req.key_fingerprint;
    {
      std::lock_guard lock(control_.mu);
      control_.instance_id = t.instance_id;
      control_.person_id = t.person_id;
    }
    control_.authenticated = true;
  }

  // ---- forwarding ---------------------------------------------------------------------------

  void Forward() {
    ssh_set_blocking(upstream_.get(), 0);
    ssh_event_add_session(event_.get(), upstream_.get());
    record_.id = control_.record_id;
    record_.relay_session_id = control_.id;
    record_.person_id = target_.person_id;
    record_.key_fingerprint = fingerprint_;
    record_.instance_id = target_.instance_id;
    record_.hostname = target_.hostname;
    record_.login = target_.login;
    record_.source_address = control_.source_address;
    record_.started_at = std::chrono::system_clock::now();
    ctx_.log->OnStart(record_);
    started_ = true;
    spdlog::info(
        "relay: relay session {} ({}) started: person {} key {} from {} to instance {} as {}",
        control_.id, control_.record_id, target_.person_id, fingerprint_, control_.source_address,
        target_.instance_id, target_.login);

    int errors = 0;
    last_authorized_ = SteadyClock::now();
    while (true) {
      if (opts_.reauthorize_interval.count() > 0 &&
          SteadyClock::now() - last_authorized_ >= opts_.reauthorize_interval) {
        Reauthorize();
      }
      if (control_.close_requested) {
        std::string reason;
        {
          std::lock_guard lock(control_.mu);
          reason = control_.close_reason;
        }
        end_reason_ = reason;
        // On the open channels' stderr, and as the disconnect message (OpenSSH prints it), so
        // the person learns why even before a channel is open.
        const std::string notice = "gpuwerk: relay session closed: " + reason;
        NotifyClient(notice);
        ssh_session_set_disconnect_message(client_.get(), notice.c_str());
        break;
      }
      int timeout_ms = 500;
      if (opts_.reauthorize_interval.count() > 0) {
        timeout_ms =
            static_cast<int>(std::min<int64_t>(timeout_ms, opts_.reauthorize_interval.count()));
      }
      int rc = ssh_event_dopoll(event_.get(), timeout_ms);
      if (rc == SSH_ERROR) {
        if (!IsConnected(client_.get()) || !IsConnected(upstream_.get()) || ++errors > 100) {
          end_reason_ = !IsConnected(client_.get())     ? "client closed"
                        : !IsConnected(upstream_.get()) ? "instance closed"
                                                        : "connection error";
          break;
        }
      } else {
        errors = 0;
      }
      // Reading one channel may pull in packets for the others (libssh polls the whole event
      // while reading), so go round until a pass finds nothing to do.
      bool work = true;
      for (int pass = 0; work && pass < 64; ++pass) {
        work = false;
        while (ssh_message msg = ssh_message_get(client_.get())) {
          HandleMessage(msg);
          work = true;
        }
        while (ssh_message msg = ssh_message_get(upstream_.get())) {
          HandleUpstreamMessage(msg);
          work = true;
        }
        work |= GlobalProgress();
        for (auto& p : pairs_) work |= Progress(*p);
      }
      std::erase_if(pairs_, [this](const std::unique_ptr<ChannelPair>& p) {
        if (!p->done) return false;
        FreePair(*p);
        return true;
      });
      if (!IsConnected(client_.get())) {
        end_reason_ = "client closed";
        break;
      }
      if (!IsConnected(upstream_.get())) {
        end_reason_ = "instance closed";
        NotifyClient("gpuwerk: the instance closed the connection");
        break;
      }
    }
  }

  /// Asks the authorizer again; a refusal, or a different instance or login, ends the relay
  /// session.
  void Reauthorize() {
    last_authorized_ = SteadyClock::now();
    auto d = ctx_.authorizer->Authorize(request_);
    if (!d) {
      spdlog::warn("relay: cannot re-check relay session {}: {}", control_.id, d.error().message);
      return;
    }
    if (d->target && d->target->instance_id == target_.instance_id &&
        d->target->login == target_.login) {
      return;
    }
    control_.RequestClose("your access to instance " + target_.hostname + " has ended");
  }

  void HandleMessage(ssh_message msg) {
    const int type = ssh_message_type(msg);
    const int subtype = ssh_message_subtype(msg);
    if (type == SSH_REQUEST_CHANNEL_OPEN &&
        (subtype == SSH_CHANNEL_SESSION || subtype == SSH_CHANNEL_DIRECT_TCPIP)) {
      auto p = std::make_unique<ChannelPair>();
      p->upstream = ssh_channel_new(upstream_.get());
      if (p->upstream == nullptr) {
        ssh_message_reply_default(msg);
        ssh_message_free(msg);
        return;
      }
      p->open_msg = msg;
      if (subtype == SSH_CHANNEL_DIRECT_TCPIP) {
        p->kind = ChannelPair::Kind::kDirectTcpip;
        const char* d = ssh_message_channel_request_open_destination(msg);
        const char* o = ssh_message_channel_request_open_originator(msg);
        p->dest_host = d ? d : "";
        p->orig_host = o ? o : "127.0.0.1";
        p->dest_port = ssh_message_channel_request_open_destination_port(msg);
        p->orig_port = ssh_message_channel_request_open_originator_port(msg);
      }
      ChannelPair& ref = *p;
      pairs_.push_back(std::move(p));
      Progress(ref);
      return;
    }
    if (type == SSH_REQUEST_CHANNEL) {
      ssh_channel ch = ssh_message_channel_request_channel(msg);
      for (auto& p : pairs_) {
        if (p->client == ch && !p->done) {
          p->requests.push_back(msg);
          Progress(*p);
          return;
        }
      }
    }
    if (type == SSH_REQUEST_GLOBAL && (subtype == SSH_GLOBAL_REQUEST_TCPIP_FORWARD ||
                                       subtype == SSH_GLOBAL_REQUEST_CANCEL_TCPIP_FORWARD)) {
      globals_.push_back(msg);  // §7.1, forwarded in order by GlobalProgress
      return;
    }
    // Other global requests (keepalive@openssh.com, …) and channel types (x11, a client's
    // forwarded-tcpip): refused, as RFC 4254 §4 and §5.1 allow.
    ssh_message_reply_default(msg);
    ssh_message_free(msg);
  }

  /// What the instance's sshd asks of the relay: channels for `ssh -R` connections and agent
  /// requests. Only those the client asked for are carried; everything else is refused.
  void HandleUpstreamMessage(ssh_message msg) {
    const int type = ssh_message_type(msg);
    const int subtype = ssh_message_subtype(msg);
    const bool wanted = type == SSH_REQUEST_CHANNEL_OPEN &&
                        ((subtype == SSH_CHANNEL_FORWARDED_TCPIP && remote_forwards_ > 0) ||
                         (subtype == SSH_CHANNEL_AUTH_AGENT && agent_forwarded_));
    if (!wanted) {
      ssh_message_reply_default(msg);
      ssh_message_free(msg);
      return;
    }
    auto p = std::make_unique<ChannelPair>();
    p->reverse = true;
    p->client = ssh_channel_new(client_.get());
    if (p->client == nullptr) {
      ssh_message_reply_default(msg);
      ssh_message_free(msg);
      return;
    }
    p->open_msg = msg;
    if (subtype == SSH_CHANNEL_FORWARDED_TCPIP) {
      p->kind = ChannelPair::Kind::kForwardedTcpip;
      const char* d = ssh_message_channel_request_open_destination(msg);
      const char* o = ssh_message_channel_request_open_originator(msg);
      p->dest_host = d ? d : "";
      p->orig_host = o ? o : "127.0.0.1";
      p->dest_port = ssh_message_channel_request_open_destination_port(msg);
      p->orig_port = ssh_message_channel_request_open_originator_port(msg);
    } else {
      p->kind = ChannelPair::Kind::kAgent;
    }
    ChannelPair& ref = *p;
    pairs_.push_back(std::move(p));
    Progress(ref);
  }

  /// Forwards the client's tcpip-forward / cancel-tcpip-forward requests (RFC 4254 §7.1) to the
  /// instance, one at a time, and answers with the instance's answer (and bound port).
  bool GlobalProgress() {
    bool work = false;
    while (!globals_.empty()) {
      ssh_message msg = globals_.front();
      const char* addr = ssh_message_global_request_address(msg);
      const int port = ssh_message_global_request_port(msg);
      int bound = 0;
      int rc = ssh_message_subtype(msg) == SSH_GLOBAL_REQUEST_TCPIP_FORWARD
                   ? ssh_channel_listen_forward(upstream_.get(), addr, port, &bound)
                   : ssh_channel_cancel_forward(upstream_.get(), addr, port);
      if (rc == SSH_AGAIN) return work;
      if (rc == SSH_OK) {
        if (ssh_message_subtype(msg) == SSH_GLOBAL_REQUEST_TCPIP_FORWARD) {
          ++remote_forwards_;
        } else if (remote_forwards_ > 0) {
          --remote_forwards_;
        }
        ssh_message_global_request_reply_success(msg, static_cast<uint16_t>(bound));
      } else {
        ssh_message_reply_default(msg);
      }
      ssh_message_free(msg);
      globals_.pop_front();
      work = true;
    }
    return work;
  }

  void OpenProgress(ChannelPair& p) {
    int rc = SSH_ERROR;
    switch (p.kind) {
      case ChannelPair::Kind::kSession:
        rc = ssh_channel_open_session(p.upstream);
        break;
      case ChannelPair::Kind::kDirectTcpip:
        rc = ssh_channel_open_forward(p.upstream, p.dest_host.c_str(), p.dest_port,
                                      p.orig_host.c_str(), p.orig_port);
        break;
      case ChannelPair::Kind::kForwardedTcpip:
        rc = ssh_channel_open_reverse_forward(p.client, p.dest_host.c_str(), p.dest_port,
                                              p.orig_host.c_str(), p.orig_port);
        break;
      case ChannelPair::Kind::kAgent:
        rc = ssh_channel_open_auth_agent(p.client);
        break;
    }
    if (rc == SSH_AGAIN) return;
    if (rc != SSH_OK) {
      ssh_message_reply_default(p.open_msg);  // SSH_MSG_CHANNEL_OPEN_FAILURE
      ssh_message_free(p.open_msg);
      p.open_msg = nullptr;
      p.done = true;
      return;
    }
    ssh_channel accepted = ssh_message_channel_request_open_reply_accept(p.open_msg);
    ssh_message_free(p.open_msg);
    p.open_msg = nullptr;
    (p.reverse ? p.upstream : p.client) = accepted;
    if (accepted == nullptr) {
      p.done = true;
      return;
    }
    ssh_callbacks_init(&p.client_cb);
    p.client_cb.userdata = &p;
    p.client_cb.channel_signal_function = &OnClientSignal;
    p.client_cb.channel_close_function = &OnClientClose;
    p.client_cb.channel_auth_agent_req_function = &OnClientAgentRequest;
    ssh_set_channel_callbacks(p.client, &p.client_cb);
    ssh_callbacks_init(&p.upstream_cb);
    p.upstream_cb.userdata = &p;
    p.upstream_cb.channel_close_function = &OnUpstreamClose;
    p.upstream_cb.channel_exit_status_function = &OnExitStatus;
    p.upstream_cb.channel_exit_signal_function = &OnExitSignal;
    ssh_set_channel_callbacks(p.upstream, &p.upstream_cb);
  }

  static void OnClientSignal(ssh_session, ssh_channel, const char* signal, void* userdata) {
    static_cast<ChannelPair*>(userdata)->signals.emplace_back(signal ? signal : "");
  }
  static void OnClientAgentRequest(ssh_session, ssh_channel, void* userdata) {
    static_cast<ChannelPair*>(userdata)->agent_requested = true;
  }
  static void OnClientClose(ssh_session, ssh_channel, void* userdata) {
    static_cast<ChannelPair*>(userdata)->client_closed = true;
  }
  static void OnUpstreamClose(ssh_session, ssh_channel, void* userdata) {
    static_cast<ChannelPair*>(userdata)->upstream_closed = true;
  }
  static void OnExitStatus(ssh_session, ssh_channel, int status, void* userdata) {
    static_cast<ChannelPair*>(userdata)->exit_status = status;
  }
  static void OnExitSignal(ssh_session, ssh_channel, const char* signal, int core,
                           const char* errmsg, const char* lang, void* userdata) {
    static_cast<ChannelPair*>(userdata)->exit_signal = ChannelPair::ExitSignal{
        signal ? signal : "", errmsg ? errmsg : "", lang ? lang : "", core != 0};
  }

  /// Forwards the head of the client's channel requests (RFC 4254 §6.2–6.10) and answers the
  /// client with the upstream's answer. Returns true when the queue is empty.
  bool RequestProgress(ChannelPair& p) {
    while (!p.requests.empty()) {
      ssh_message msg = p.requests.front();
      int rc = SSH_ERROR;
      switch (ssh_message_subtype(msg)) {
        case SSH_CHANNEL_REQUEST_PTY: {  // §6.2
          const char* term = ssh_message_channel_request_pty_term(msg);
          rc = ssh_channel_request_pty_size(p.upstream, term ? term : "xterm",
                                            ssh_message_channel_request_pty_width(msg),
                                            ssh_message_channel_request_pty_height(msg));
          break;
        }
        case SSH_CHANNEL_REQUEST_ENV:  // §6.4
          rc = ssh_channel_request_env(p.upstream, ssh_message_channel_request_env_name(msg),
                                       ssh_message_channel_request_env_value(msg));
          break;
        case SSH_CHANNEL_REQUEST_SHELL:  // §6.5
          rc = ssh_channel_request_shell(p.upstream);
          break;
        case SSH_CHANNEL_REQUEST_EXEC:  // §6.5
          rc = ssh_channel_request_exec(p.upstream, ssh_message_channel_request_command(msg));
          break;
        case SSH_CHANNEL_REQUEST_SUBSYSTEM:  // §6.5 (sftp)
          rc =
              ssh_channel_request_subsystem(p.upstream, ssh_message_channel_request_subsystem(msg));
          break;
        case SSH_CHANNEL_REQUEST_WINDOW_CHANGE:  // §6.7
          rc = ssh_channel_change_pty_size(p.upstream, ssh_message_channel_request_pty_width(msg),
                                           ssh_message_channel_request_pty_height(msg));
          break;
        default:  // x11-req and unknown requests: refused
          rc = SSH_ERROR;
      }
      if (rc == SSH_AGAIN) {
        p.request_in_flight = true;
        return false;
      }
      p.request_in_flight = false;
      if (rc == SSH_OK) {
        ssh_message_channel_request_reply_success(msg);
      } else {
        ssh_message_reply_default(msg);
      }
      ssh_message_free(msg);
      p.requests.pop_front();
    }
    return true;
  }

  /// Moves whatever can move on one channel pair; true when something did.
  bool Progress(ChannelPair& p) {
    if (p.done) return false;
    bool work = false;
    if (p.open_msg != nullptr) {
      OpenProgress(p);
      if (p.open_msg != nullptr) return false;
      work = true;
      if (p.done) return true;
    }
    if (p.client == nullptr || p.upstream == nullptr) return work;
    // Requests without a reply go only when none with a reply is outstanding on the upstream
    // channel (libssh tracks one request per channel). The agent request goes first: it
    // precedes the shell or exec on the wire, and sshd sets SSH_AUTH_SOCK when it starts those.
    if (!p.request_in_flight) {
      if (p.agent_requested && !p.agent_forwarded) {
        ssh_channel_request_auth_agent(p.upstream);
        p.agent_forwarded = true;
        agent_forwarded_ = true;
        work = true;
      }
      while (!p.signals.empty()) {  // §6.9
        ssh_channel_request_send_signal(p.upstream, p.signals.front().c_str());
        p.signals.pop_front();
        work = true;
      }
    }
    const size_t pending = p.requests.size();
    const bool requests_idle = RequestProgress(p);
    work |= p.requests.size() != pending;
    std::array<char, kChunk> buf;
    // Client → upstream. Held back while a request (shell, exec, …) is still on its way: sshd drops
    // data for a session channel that has no program yet.
    if (requests_idle && !p.eof_sent_upstream && !p.upstream_closed) {
      while (true) {
        uint32_t win = ssh_channel_window_size(p.upstream);
        if (win == 0) break;
        int n = ssh_channel_read_nonblocking(p.client, buf.data(),
                                             std::min<uint32_t>(win, buf.size()), 0);
        if (n <= 0) break;
        ssh_channel_write(p.upstream, buf.data(), static_cast<uint32_t>(n));
        record_.bytes_from_client += static_cast<uint64_t>(n);
        work = true;
      }
      if (ssh_channel_is_eof(p.client)) {  // §5.3: half-close
        ssh_channel_send_eof(p.upstream);
        p.eof_sent_upstream = true;
        work = true;
      }
    }
    // Upstream → client, stdout then stderr (§5.2 extended data).
    if (!p.eof_sent_client && !p.client_closed) {
      for (int is_stderr = 0; is_stderr <= 1; ++is_stderr) {
        while (true) {
          uint32_t win = ssh_channel_window_size(p.client);
          if (win == 0) break;
          int n = ssh_channel_read_nonblocking(p.upstream, buf.data(),
                                               std::min<uint32_t>(win, buf.size()), is_stderr);
          if (n <= 0) break;
          if (is_stderr) {
            ssh_channel_write_stderr(p.client, buf.data(), static_cast<uint32_t>(n));
          } else {
            ssh_channel_write(p.client, buf.data(), static_cast<uint32_t>(n));
          }
          record_.bytes_to_client += static_cast<uint64_t>(n);
          work = true;
        }
      }
      if (ssh_channel_is_eof(p.upstream)) {
        ForwardExit(p);
        ssh_channel_send_eof(p.client);
        p.eof_sent_client = true;
        work = true;
      }
    }
    if (p.upstream_closed && p.eof_sent_client) {
      // §6.10: exit-status / exit-signal before CHANNEL_CLOSE.
      ForwardExit(p);
      ssh_channel_close(p.client);
      p.done = true;
      work = true;
    } else if (p.client_closed) {
      ssh_channel_close(p.upstream);
      p.done = true;
      work = true;
    }
    return work;
  }

  void ForwardExit(ChannelPair& p) {
    if (p.exit_signal) {
      ssh_channel_request_send_exit_signal(
          p.client, p.exit_signal->signal.c_str(), p.exit_signal->core ? 1 : 0,
          p.exit_signal->errmsg.c_str(), p.exit_signal->lang.c_str());
      p.exit_signal.reset();
    }
    if (p.exit_status) {
      ssh_channel_request_send_exit_status(p.client, *p.exit_status);
      p.exit_status.reset();
    }
  }

  void FreePair(ChannelPair& p) {
    if (p.open_msg != nullptr) {
      ssh_message_free(p.open_msg);
      p.open_msg = nullptr;
    }
    for (ssh_message m : p.requests) ssh_message_free(m);
    p.requests.clear();
    if (p.client != nullptr) {
      ssh_remove_channel_callbacks(p.client, &p.client_cb);
      ssh_channel_free(p.client);
      p.client = nullptr;
    }
    if (p.upstream != nullptr) {
      ssh_remove_channel_callbacks(p.upstream, &p.upstream_cb);
      ssh_channel_free(p.upstream);
      p.upstream = nullptr;
    }
  }

  /// Tells the person on every open session channel why their relay session ends.
  void NotifyClient(const std::string& text) {
    const std::string line = "\r\n" + text + "\r\n";
    for (auto& p : pairs_) {
      if (p->client == nullptr || p->client_closed || p->eof_sent_client ||
          p->kind != ChannelPair::Kind::kSession)
        continue;
      ssh_channel_write_stderr(p->client, line.data(), static_cast<uint32_t>(line.size()));
    }
  }

  void Teardown() {
    // Flush what is queued (the notice, closes) with a short bound; a stalled client costs this
    // thread at most that long.
    if (client_ != nullptr && IsConnected(client_.get())) {
      ssh_set_blocking(client_.get(), 1);
      SetTimeout(client_.get(), std::chrono::milliseconds(2000));
    }
    for (auto& p : pairs_) {
      if (p->client != nullptr && !p->client_closed) ssh_channel_close(p->client);
      FreePair(*p);
    }
    pairs_.clear();
    for (ssh_message m : globals_) ssh_message_free(m);
    globals_.clear();
    if (started_) {
      record_.ended_at = std::chrono::system_clock::now();
      record_.end_reason = end_reason_.empty() ? "ended" : end_reason_;
      ctx_.log->OnEnd(record_);
      spdlog::info("relay: relay session {} ended ({}): {} bytes in, {} bytes out", control_.id,
                   record_.end_reason, record_.bytes_from_client, record_.bytes_to_client);
    }
    if (event_ != nullptr) {
      ssh_event_remove_fd(event_.get(), control_.wake_fd);
      if (client_ != nullptr) ssh_event_remove_session(event_.get(), client_.get());
      if (upstream_ != nullptr && started_) ssh_event_remove_session(event_.get(), upstream_.get());
      event_.reset();
    }
    upstream_.reset();
    if (client_ != nullptr) {
      {
        std::lock_guard lock(control_.mu);
        control_.client_fd = -1;
      }
      client_.reset();
    }
  }

  SshSessionPtr client_;
  SshSessionPtr upstream_;
  SshEventPtr event_;
  const ConnectionContext& ctx_;
  const RelayOptions& opts_;
  ConnectionControl& control_;
  SteadyClock::time_point accepted_at_;
  bool authenticated_ = false;
  bool fatal_ = false;
  bool started_ = false;
  int auth_failures_ = 0;
  AuthorizeRequest request_;  ///< what was authorized (asked again by Reauthorize)
  RelayTarget target_;
  SteadyClock::time_point last_authorized_;
  std::string fingerprint_;
  std::string end_reason_;
  RelaySessionRecord record_;
  std::vector<std::unique_ptr<ChannelPair>> pairs_;
  std::deque<ssh_message> globals_;  ///< the client's tcpip-forward requests, in order
  int remote_forwards_ = 0;          ///< tcpip-forward listeners the instance holds for the client
  bool agent_forwarded_ = false;     ///< the client asked for agent forwarding on some channel
};

}  // namespace

void RunConnection(SshSessionPtr client, const ConnectionContext& context,
                   ConnectionControl& control) {
  Connection c(std::move(client), context, control);
  c.Run();
}

}  // namespace gpuwerk::relay::internal
