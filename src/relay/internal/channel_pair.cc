#include "relay/internal/channel_pair.h"

#include <algorithm>
#include <string>
#include <vector>

// libssh 0.10 marks the pty getters deprecated in favour of the callback API, but the message API
// is the one that lets the relay answer a client's request after the upstream has answered (see
// docs/ssh.md "Threading"); they are still supported.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace gpuwerk::relay::internal {
namespace {

constexpr size_t kChunk = 64 * 1024;

ChannelPair& PairOf(void* userdata) { return *static_cast<ChannelPair*>(userdata); }

void OnClientSignal(ssh_session, ssh_channel, const char* signal, void* userdata) {
  PairOf(userdata).signals.emplace_back(signal ? signal : "");
}
void OnClientAgentRequest(ssh_session, ssh_channel, void* userdata) {
  PairOf(userdata).agent_requested = true;
}
void OnClientClose(ssh_session, ssh_channel, void* userdata) {
  PairOf(userdata).client_closed = true;
}
void OnUpstreamClose(ssh_session, ssh_channel, void* userdata) {
  PairOf(userdata).upstream_closed = true;
}
void OnExitStatus(ssh_session, ssh_channel, int status, void* userdata) {
  PairOf(userdata).exit_status = status;
}
void OnExitSignal(ssh_session, ssh_channel, const char* signal, int core, const char* errmsg,
                  const char* lang, void* userdata) {
  PairOf(userdata).exit_signal = ChannelPair::ExitSignal{signal ? signal : "", errmsg ? errmsg : "",
                                                         lang ? lang : "", core != 0};
}

/// Sends one client channel request (RFC 4254 §6.2–6.7) on `upstream`: SSH_OK, SSH_AGAIN (the
/// answer has not come yet) or SSH_ERROR (refused, or a request the relay does not carry).
int SendRequest(ssh_message msg, ssh_channel upstream) {
  switch (ssh_message_subtype(msg)) {
    case SSH_CHANNEL_REQUEST_PTY: {  // §6.2
      const char* term = ssh_message_channel_request_pty_term(msg);
      return ssh_channel_request_pty_size(upstream, term ? term : "xterm",
                                          ssh_message_channel_request_pty_width(msg),
                                          ssh_message_channel_request_pty_height(msg));
    }
    case SSH_CHANNEL_REQUEST_ENV:  // §6.4
      return ssh_channel_request_env(upstream, ssh_message_channel_request_env_name(msg),
                                     ssh_message_channel_request_env_value(msg));
    case SSH_CHANNEL_REQUEST_SHELL:  // §6.5
      return ssh_channel_request_shell(upstream);
    case SSH_CHANNEL_REQUEST_EXEC:  // §6.5
      return ssh_channel_request_exec(upstream, ssh_message_channel_request_command(msg));
    case SSH_CHANNEL_REQUEST_SUBSYSTEM:  // §6.5 (sftp)
      return ssh_channel_request_subsystem(upstream, ssh_message_channel_request_subsystem(msg));
    case SSH_CHANNEL_REQUEST_WINDOW_CHANGE:  // §6.7
      return ssh_channel_change_pty_size(upstream, ssh_message_channel_request_pty_width(msg),
                                         ssh_message_channel_request_pty_height(msg));
    default:  // x11-req and unknown requests: refused
      return SSH_ERROR;
  }
}

}  // namespace

ChannelPair::~ChannelPair() {
  // libssh may keep a freed channel until its close arrives; its callbacks must not outlive us.
  if (client != nullptr) ssh_remove_channel_callbacks(client.get(), &client_cb_);
  if (upstream != nullptr) ssh_remove_channel_callbacks(upstream.get(), &upstream_cb_);
}

bool ChannelPair::CanNotifyClient() const {
  return client != nullptr && !client_closed && !eof_sent_client && kind == Kind::kSession;
}

void ChannelPair::OpenProgress() {
  int rc = SSH_ERROR;
  switch (kind) {
    case Kind::kSession:
      rc = ssh_channel_open_session(upstream.get());
      break;
    case Kind::kDirectTcpip:
      rc = ssh_channel_open_forward(upstream.get(), dest_host.c_str(), dest_port, orig_host.c_str(),
                                    orig_port);
      break;
    case Kind::kForwardedTcpip:
      rc = ssh_channel_open_reverse_forward(client.get(), dest_host.c_str(), dest_port,
                                            orig_host.c_str(), orig_port);
      break;
    case Kind::kAgent:
      rc = ssh_channel_open_auth_agent(client.get());
      break;
  }
  if (rc == SSH_AGAIN) return;
  if (rc != SSH_OK) {
    ssh_message_reply_default(open_msg.get());  // SSH_MSG_CHANNEL_OPEN_FAILURE
    open_msg.reset();
    done = true;
    return;
  }
  SshChannelPtr accepted(ssh_message_channel_request_open_reply_accept(open_msg.get()));
  open_msg.reset();
  const bool accepted_ok = accepted != nullptr;
  (reverse ? upstream : client) = std::move(accepted);
  if (!accepted_ok) {
    done = true;
    return;
  }
  opened = true;
  ssh_callbacks_init(&client_cb_);
  client_cb_.userdata = this;
  client_cb_.channel_signal_function = &OnClientSignal;
  client_cb_.channel_close_function = &OnClientClose;
  client_cb_.channel_auth_agent_req_function = &OnClientAgentRequest;
  ssh_set_channel_callbacks(client.get(), &client_cb_);
  ssh_callbacks_init(&upstream_cb_);
  upstream_cb_.userdata = this;
  upstream_cb_.channel_close_function = &OnUpstreamClose;
  upstream_cb_.channel_exit_status_function = &OnExitStatus;
  upstream_cb_.channel_exit_signal_function = &OnExitSignal;
  ssh_set_channel_callbacks(upstream.get(), &upstream_cb_);
}

/// Forwards the head of the client's channel requests (RFC 4254 §6.2–6.10) and answers the
/// client with the upstream's answer. Returns true when the queue is empty.
bool ChannelPair::RequestProgress() {
  while (!requests.empty()) {
    ssh_message msg = requests.front().get();
    const int rc = SendRequest(msg, upstream.get());
    if (rc == SSH_AGAIN) {
      request_in_flight = true;
      return false;
    }
    request_in_flight = false;
    if (rc == SSH_OK) {
      ssh_message_channel_request_reply_success(msg);
    } else {
      ssh_message_reply_default(msg);
    }
    requests.pop_front();
  }
  return true;
}

void HeldBytes::Consume(size_t n) {
  offset += n;
  if (offset < data.size()) return;
  offset = 0;
  if (data.capacity() > kChunk) {
    std::vector<char>().swap(data);  // up to a window; an idle channel keeps nothing
  } else {
    data.clear();
  }
}

size_t ChannelPair::Held(ssh_channel channel, int is_stderr, bool from_client,
                         const ChannelLimits& limits) {
  if (channel == nullptr) return 0;
  const int n = ssh_channel_poll(channel, is_stderr);  // SSH_EOF, SSH_ERROR: nothing held
  if (n <= 0) return 0;
  const auto held = static_cast<size_t>(n);
  if (held > limits.max_buffered && violation.empty()) {
    violation = std::string(from_client ? "the client" : "the instance") +
                " sent more than its channel window allows (" + std::to_string(held) +
                " bytes held on one channel, limit " + std::to_string(limits.max_buffered) + ")";
  }
  return held;
}

bool ChannelPair::CheckHeld(const ChannelLimits& limits, bool client_side, bool upstream_side) {
  if (!opened) return true;
  if (client_side && !client_closed) {
    Held(client.get(), 0, true, limits);
    Held(client.get(), 1, true, limits);
  }
  if (upstream_side && !upstream_closed) {
    Held(upstream.get(), 0, false, limits);
    Held(upstream.get(), 1, false, limits);
  }
  if (signals.size() > limits.max_queued_requests && violation.empty()) {
    violation = "the client queued more than " + std::to_string(limits.max_queued_requests) +
                " requests on one channel";
  }
  return violation.empty();
}

void ChannelPair::Take(ssh_channel channel, int is_stderr, size_t n, HeldBytes& into) {
  into.data.resize(into.offset + n);
  const int got = ssh_channel_read_nonblocking(channel, into.data.data() + into.offset,
                                               static_cast<uint32_t>(n), is_stderr);
  into.data.resize(into.offset + static_cast<size_t>(std::max(got, 0)));
}

bool ChannelPair::WriteHeld(HeldBytes& from, ssh_channel to, bool is_stderr, uint64_t& counter) {
  bool work = false;
  ssh_session session = ssh_channel_get_session(to);
  while (!from.empty()) {
    // SSH_OK only once libssh's output buffer for that socket is empty (it tries one
    // non-blocking write first): a peer that does not read its socket gets nothing more.
    if (ssh_blocking_flush(session, 0) != SSH_OK) break;
    const uint32_t win = ssh_channel_window_size(to);
    if (win == 0) break;
    const auto n = static_cast<uint32_t>(std::min<size_t>({from.size(), win, kChunk}));
    const char* p = from.data.data() + from.offset;
    const int w = is_stderr ? ssh_channel_write_stderr(to, p, n) : ssh_channel_write(to, p, n);
    if (w <= 0) break;
    from.Consume(static_cast<size_t>(w));
    counter += static_cast<uint64_t>(w);
    work = true;
  }
  return work;
}

bool ChannelPair::Settled() const {
  if (!done) return false;
  if (!opened) return true;
  return client_closed && upstream_closed;
}

bool ChannelPair::Progress(ForwardedBytes& bytes, const ChannelLimits& limits) {
  if (!violation.empty()) return false;
  if (done) {
    CheckHeld(limits, true, true);
    return false;
  }
  bool work = false;
  if (open_msg != nullptr) {
    OpenProgress();
    if (open_msg != nullptr) return false;
    work = true;
    if (done) return true;
  }
  if (client == nullptr || upstream == nullptr) return work;
  // Each stream libssh holds is looked at once a pass (ssh_channel_poll may read the socket):
  // by the copying below when it takes data, else by CheckHeld at the end.
  bool client_checked = false;
  bool upstream_checked = false;
  // Requests without a reply go only when none with a reply is outstanding on the upstream
  // channel (libssh tracks one request per channel). The agent request goes first: it
  // precedes the shell or exec on the wire, and sshd sets SSH_AUTH_SOCK when it starts those.
  if (!request_in_flight) {
    if (agent_requested && !agent_forwarded) {
      ssh_channel_request_auth_agent(upstream.get());
      agent_forwarded = true;
      work = true;
    }
    while (!signals.empty()) {  // §6.9
      ssh_channel_request_send_signal(upstream.get(), signals.front().c_str());
      signals.pop_front();
      work = true;
    }
  }
  const size_t pending = requests.size();
  const bool requests_idle = RequestProgress();
  work |= requests.size() != pending;
  // Client → upstream. Held back while a request (shell, exec, …) is still on its way: sshd drops
  // data for a session channel that has no program yet.
  if (requests_idle && !eof_sent_upstream && !upstream_closed) {
    work |= WriteHeld(to_upstream_, upstream.get(), false, bytes.from_client);
    if (to_upstream_.empty()) {
      client_checked = true;
      if (const size_t n = Held(client.get(), 0, true, limits); n > 0 && violation.empty()) {
        Take(client.get(), 0, n, to_upstream_);
        work = true;
        WriteHeld(to_upstream_, upstream.get(), false, bytes.from_client);
      }
      // Extended data from a client has no meaning on any channel the relay carries (§5.2;
      // sshd drops it too): taken and dropped, so it neither piles up nor holds back the EOF.
      if (const size_t n = Held(client.get(), 1, true, limits); n > 0 && violation.empty()) {
        HeldBytes dropped;
        Take(client.get(), 1, n, dropped);
        work = true;
      }
    }
    if (!violation.empty()) return work;
    if (to_upstream_.empty() && ssh_channel_is_eof(client.get())) {  // §5.3: half-close
      ssh_channel_send_eof(upstream.get());
      eof_sent_upstream = true;
      work = true;
    }
  }
  // Upstream → client, stdout and stderr (§5.2 extended data).
  if (!eof_sent_client && !client_closed) {
    work |= WriteHeld(to_client_, client.get(), false, bytes.to_client);
    work |= WriteHeld(to_client_stderr_, client.get(), true, bytes.to_client);
    // Both streams share one window: both are taken together, once both are written.
    if (to_client_.empty() && to_client_stderr_.empty()) {
      upstream_checked = true;
      const size_t out = Held(upstream.get(), 0, false, limits);
      const size_t err = Held(upstream.get(), 1, false, limits);
      if (!violation.empty()) return work;
      if (out > 0) Take(upstream.get(), 0, out, to_client_);
      if (err > 0) Take(upstream.get(), 1, err, to_client_stderr_);
      if (out > 0 || err > 0) {
        work = true;
        WriteHeld(to_client_, client.get(), false, bytes.to_client);
        WriteHeld(to_client_stderr_, client.get(), true, bytes.to_client);
      }
    }
    if (to_client_.empty() && to_client_stderr_.empty() && ssh_channel_is_eof(upstream.get())) {
      ForwardExit();
      ssh_channel_send_eof(client.get());
      eof_sent_client = true;
      work = true;
    }
  }
  if (!CheckHeld(limits, !client_checked, !upstream_checked)) return work;
  if (upstream_closed && eof_sent_client) {
    // §6.10: exit-status / exit-signal before CHANNEL_CLOSE.
    ForwardExit();
    ssh_channel_close(client.get());
    done = true;
    work = true;
  } else if (client_closed) {
    ssh_channel_close(upstream.get());
    done = true;
    work = true;
  }
  return work;
}

void ChannelPair::ForwardExit() {
  if (exit_signal) {
    ssh_channel_request_send_exit_signal(client.get(), exit_signal->signal.c_str(),
                                         exit_signal->core ? 1 : 0, exit_signal->errmsg.c_str(),
                                         exit_signal->lang.c_str());
    exit_signal.reset();
  }
  if (exit_status) {
    ssh_channel_request_send_exit_status(client.get(), *exit_status);
    exit_status.reset();
  }
}

}  // namespace gpuwerk::relay::internal
