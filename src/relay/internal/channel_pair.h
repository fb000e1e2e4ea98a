#pragma once

// Include only from .cc files of src/relay (libssh types).

#include <libssh/callbacks.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "relay/internal/ssh_handles.h"

namespace gpuwerk::relay::internal {

/// Payload bytes carried by a relay session's channels (RelaySessionRecord's counts).
struct ForwardedBytes {
  uint64_t from_client = 0;  ///< client → instance
  uint64_t to_client = 0;    ///< instance → client, stdout and stderr
};

/// One client channel and its upstream twin (docs/ssh.md "What is forwarded"): opens the twin and
/// answers the pending open with its answer, forwards the client's channel requests (pty, env,
/// shell, exec, subsystem, window-change, signal, agent) and the instance's exit status or
/// signal, copies data both ways within both windows, and carries EOF and close. Owns both
/// channels, the pending open and the queued requests; lives at a stable address (the channel
/// callbacks point at it). Driven by one thread.
struct ChannelPair {
  enum class Kind {
    kSession,         ///< client → instance, RFC 4254 §6.1
    kDirectTcpip,     ///< client → instance (`ssh -L`, `-W`), §7.2
    kForwardedTcpip,  ///< instance → client (`ssh -R`), §7.2
    kAgent,           ///< instance → client (`ssh -A`), auth-agent@openssh.com
  };

  ChannelPair() = default;
  ChannelPair(const ChannelPair&) = delete;
  ChannelPair& operator=(const ChannelPair&) = delete;
  /// Detaches the callbacks, then frees the pending messages and both channels.
  ~ChannelPair();

  /// Moves whatever can move (open, requests, data, EOF, exit, close) and adds the payload to
  /// `bytes`; true when something did. Non-blocking.
  bool Progress(ForwardedBytes& bytes);

  /// True when the client's side is an open session channel (it can show a notice on stderr).
  bool CanNotifyClient() const;

  Kind kind = Kind::kSession;
  /// Opened by the instance side (forwarded-tcpip, agent): `open_msg` came from the upstream and
  /// is answered once the client accepted our open.
  bool reverse = false;
  SshChannelPtr upstream;  ///< upstream side; for a reverse pair null until opened
  SshChannelPtr client;    ///< client side; for a forward pair null until opened
  SshMessagePtr open_msg;  ///< the pending open, answered once the other side answers
  std::string dest_host, orig_host;
  int dest_port = 0, orig_port = 0;

  std::deque<SshMessagePtr> requests;  ///< client channel requests, forwarded one at a time
  std::deque<std::string> signals;     ///< client "signal" requests (no reply), to forward
  bool request_in_flight = false;      ///< the head of `requests` was sent upstream, no answer yet
  bool agent_requested = false;        ///< the client sent auth-agent-req@openssh.com
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

 private:
  void OpenProgress();
  bool RequestProgress();
  void ForwardExit();

  ssh_channel_callbacks_struct client_cb_{};
  ssh_channel_callbacks_struct upstream_cb_{};
};

}  // namespace gpuwerk::relay::internal
