#pragma once

// Include only from .cc files of src/relay (libssh types).

#include <libssh/callbacks.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "relay/internal/ssh_handles.h"

namespace gpuwerk::relay::internal {

/// Payload bytes carried by a relay session's channels (RelaySessionRecord's counts).
struct ForwardedBytes {
  uint64_t from_client = 0;  ///< client → instance
  uint64_t to_client = 0;    ///< instance → client, stdout and stderr
};

/// What one connection's channels may make the relay hold (RelayOptions; docs/ssh.md "Limits").
struct ChannelLimits {
  size_t max_channels = 16;         ///< channel pairs at once, unconfirmed closes included
  size_t max_queued_requests = 32;  ///< requests and signals waiting on one channel
  size_t max_pending_globals = 8;   ///< tcpip-forward requests waiting for the instance
  size_t max_buffered = 1'542'144;  ///< bytes libssh holds for one channel and stream
};

/// Bytes the relay took from one side of a channel and has not written to the other yet.
struct HeldBytes {
  std::vector<char> data;
  size_t offset = 0;  ///< bytes of `data` already written
  size_t size() const { return data.size() - offset; }
  bool empty() const { return offset == data.size(); }
  /// Forgets `n` written bytes; frees the storage once all are written.
  void Consume(size_t n);
};

/// One client channel and its upstream twin (docs/ssh.md "What is forwarded"): opens the twin and
/// answers the pending open with its answer, forwards the client's channel requests (pty, env,
/// shell, exec, subsystem, window-change, signal, agent) and the instance's exit status or
/// signal, copies data both ways within both windows, and carries EOF and close. Owns both
/// channels, the pending open and the queued requests; lives at a stable address (the channel
/// callbacks point at it). Driven by one thread.
///
/// Data (docs/ssh.md "Memory"): libssh 0.10 re-opens a channel's whole window on every read,
/// however much it still holds, so reading a little at a time lets a fast sender pile up data
/// in libssh without bound, and it keeps whatever a peer sends past its window. So the relay
/// takes everything libssh holds for a stream at once, and only when it has written all it took
/// before: libssh then holds at most the window it granted, and the relay at most one window
/// more. What libssh holds beyond `ChannelLimits::max_buffered` is a peer that ignored the
/// window: `violation` says so and the connection ends. Nothing is written to a session whose
/// socket has not taken what was queued before (the other side stops reading), so libssh's
/// output buffer stays within one chunk.
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
  /// `bytes`; true when something did. Non-blocking. Sets `violation` (and moves nothing more)
  /// when a peer went past `limits`; a finished pair only checks.
  bool Progress(ForwardedBytes& bytes, const ChannelLimits& limits);

  /// True when the pair is done and every channel it opened has been closed by its peer too:
  /// libssh keeps a channel (and buffers what arrives on it) until the peer's close, so the pair
  /// holds and checks it until then.
  bool Settled() const;

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

  bool opened = false;           ///< both channels are open (the open succeeded)
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

  /// Why the connection must end (a peer went past a limit); empty while none did.
  std::string violation;

 private:
  void OpenProgress();
  bool RequestProgress();
  void ForwardExit();
  /// What libssh holds for `channel`'s stream (0 when the channel is gone); sets `violation`
  /// past `limits.max_buffered`. `from_client` names the sender in the reason.
  size_t Held(ssh_channel channel, int is_stderr, bool from_client, const ChannelLimits& limits);
  /// Checks the streams libssh holds for the chosen sides of this pair, and the queued signals;
  /// false on a violation.
  bool CheckHeld(const ChannelLimits& limits, bool client_side, bool upstream_side);
  /// Takes the `n` bytes libssh holds for `channel`'s stream into `into` (all of them: see the
  /// class comment).
  void Take(ssh_channel channel, int is_stderr, size_t n, HeldBytes& into);
  /// Writes what `from` holds to `to` within its window while its session's socket keeps up;
  /// adds the bytes to `counter`. True when something was written.
  static bool WriteHeld(HeldBytes& from, ssh_channel to, bool is_stderr, uint64_t& counter);

  HeldBytes to_upstream_;       ///< client → instance
  HeldBytes to_client_;         ///< instance → client, stdout
  HeldBytes to_client_stderr_;  ///< instance → client, extended data

  ssh_channel_callbacks_struct client_cb_{};
  ssh_channel_callbacks_struct upstream_cb_{};
};

}  // namespace gpuwerk::relay::internal
