#pragma once

// Include only from .cc files of src/relay (libssh types).

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "relay/internal/channel_pair.h"
#include "relay/internal/ssh_handles.h"

namespace gpuwerk::relay::internal {

/// Everything a relay session carries after login (docs/ssh.md "What is forwarded"): the
/// client's channel opens and requests, its tcpip-forward / cancel-tcpip-forward requests (RFC
/// 4254 §7.1), and the channels the instance opens back (forwarded-tcpip for `ssh -R`,
/// auth-agent@openssh.com for `ssh -A`), which are carried only when the client asked for them.
/// Holds the channel pairs; the two sessions must outlive them (CloseAll frees them). Driven by
/// the connection's thread; every call is non-blocking.
///
/// Bounds (`ChannelLimits`, from RelayOptions): opens past `max_channels` are refused; a peer
/// that sends past its window, or a client that queues more requests than allowed, sets
/// `violation()`, after which nothing more moves and the connection must end.
class ChannelForwarding {
 public:
  /// `name` introduces the connection in log lines ("relay session 3 (rls_…) from 192.0.2.7").
  ChannelForwarding(ssh_session client, ssh_session upstream, ChannelLimits limits,
                    std::string name)
      : client_(client), upstream_(upstream), limits_(limits), name_(std::move(name)) {}
  ChannelForwarding(const ChannelForwarding&) = delete;
  ChannelForwarding& operator=(const ChannelForwarding&) = delete;

  /// Handles a message the client sent (`ssh_message_get` on the client session): a session or
  /// direct-tcpip open, a request on an open channel, a tcpip-forward; refuses the rest.
  void OnClientMessage(SshMessagePtr msg);

  /// Handles a message the instance's sshd sent: the channel opens the client asked for
  /// (forwarded-tcpip after a tcpip-forward, an agent channel after agent forwarding); refuses
  /// the rest.
  void OnUpstreamMessage(SshMessagePtr msg);

  /// One pass over the tcpip-forward requests and every channel pair; true when something moved.
  bool Progress();

  /// Frees the channel pairs that have finished and whose channels the peers have closed.
  void RemoveFinished();

  /// Why the connection must end (a peer went past a limit); empty while none did.
  const std::string& violation() const { return violation_; }

  /// Writes `text` on the stderr of every open session channel (the person sees why their relay
  /// session ends).
  void NotifyClient(const std::string& text);

  /// Teardown: closes every channel the client has not closed, frees every pair and drops the
  /// queued tcpip-forward requests unanswered.
  void CloseAll();

  /// Payload carried so far.
  const ForwardedBytes& bytes() const { return bytes_; }

 private:
  /// Starts a pair for a channel open (`kind` says which side asked) and advances it.
  void AddPair(ChannelPair::Kind kind, SshMessagePtr open);
  /// Advances one pair; notes agent forwarding and a violation.
  bool Advance(ChannelPair& pair);
  /// Whether one more channel may open; logs the first refusal of the connection.
  bool RoomForChannel(const char* kind);
  /// Forwards the client's tcpip-forward / cancel-tcpip-forward requests to the instance, one at
  /// a time, and answers with the instance's answer (and bound port).
  bool GlobalProgress();

  ssh_session client_;
  ssh_session upstream_;
  ChannelLimits limits_;
  std::string name_;
  std::string violation_;
  bool refusal_logged_ = false;  ///< a channel open was refused for the cap (logged once)
  std::vector<std::unique_ptr<ChannelPair>> pairs_;
  std::deque<SshMessagePtr> globals_;  ///< the client's tcpip-forward requests, in order
  int remote_forwards_ = 0;       ///< tcpip-forward listeners the instance holds for the client
  bool agent_forwarded_ = false;  ///< the client asked for agent forwarding on some channel
  ForwardedBytes bytes_;
};

}  // namespace gpuwerk::relay::internal
