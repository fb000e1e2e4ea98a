#include "relay/internal/channel_forwarding.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace gpuwerk::relay::internal {

bool ChannelForwarding::RoomForChannel(const char* kind) {
  if (pairs_.size() < limits_.max_channels) return true;
  if (!refusal_logged_) {
    refusal_logged_ = true;
    spdlog::warn(
        "relay: {} refused a {} channel: it holds {} channels, the most one connection may hold "
        "(max_channels_per_connection); further refusals on it are not logged",
        name_, kind, pairs_.size());
  }
  return false;
}

void ChannelForwarding::OnClientMessage(SshMessagePtr msg) {
  if (!violation_.empty()) return;  // the connection is ending
  const int type = ssh_message_type(msg.get());
  const int subtype = ssh_message_subtype(msg.get());
  if (type == SSH_REQUEST_CHANNEL_OPEN &&
      (subtype == SSH_CHANNEL_SESSION || subtype == SSH_CHANNEL_DIRECT_TCPIP)) {
    const bool session = subtype == SSH_CHANNEL_SESSION;
    if (!RoomForChannel(session ? "session" : "direct-tcpip")) {
      ssh_message_reply_default(msg.get());  // SSH_OPEN_ADMINISTRATIVELY_PROHIBITED (§5.1)
      return;
    }
    AddPair(session ? ChannelPair::Kind::kSession : ChannelPair::Kind::kDirectTcpip,
            std::move(msg));
    return;
  }
  if (type == SSH_REQUEST_CHANNEL) {
    ssh_channel ch = ssh_message_channel_request_channel(msg.get());
    for (auto& p : pairs_) {
      if (p->client.get() == ch && !p->done) {
        if (p->requests.size() + p->signals.size() >= limits_.max_queued_requests) {
          violation_ = "the client queued more than " +
                       std::to_string(limits_.max_queued_requests) + " requests on one channel";
          return;
        }
        p->requests.push_back(std::move(msg));
        Advance(*p);
        return;
      }
    }
  }
  if (type == SSH_REQUEST_GLOBAL && (subtype == SSH_GLOBAL_REQUEST_TCPIP_FORWARD ||
                                     subtype == SSH_GLOBAL_REQUEST_CANCEL_TCPIP_FORWARD)) {
    if (globals_.size() >= limits_.max_pending_globals) {
      violation_ = "the client queued more than " + std::to_string(limits_.max_pending_globals) +
                   " port-forwarding requests";
      return;
    }
    globals_.push_back(std::move(msg));  // §7.1, forwarded in order by GlobalProgress
    return;
  }
  // Other global requests (keepalive@openssh.com, …) and channel types (x11, a client's
  // forwarded-tcpip): refused, as RFC 4254 §4 and §5.1 allow.
  ssh_message_reply_default(msg.get());
}

void ChannelForwarding::OnUpstreamMessage(SshMessagePtr msg) {
  if (!violation_.empty()) return;  // the connection is ending
  const int type = ssh_message_type(msg.get());
  const int subtype = ssh_message_subtype(msg.get());
  if (type == SSH_REQUEST_CHANNEL_OPEN && subtype == SSH_CHANNEL_FORWARDED_TCPIP &&
      remote_forwards_ > 0 && RoomForChannel("forwarded-tcpip")) {
    AddPair(ChannelPair::Kind::kForwardedTcpip, std::move(msg));
  } else if (type == SSH_REQUEST_CHANNEL_OPEN && subtype == SSH_CHANNEL_AUTH_AGENT &&
             agent_forwarded_ && RoomForChannel("agent")) {
    AddPair(ChannelPair::Kind::kAgent, std::move(msg));
  } else {
    ssh_message_reply_default(msg.get());
  }
}

void ChannelForwarding::AddPair(ChannelPair::Kind kind, SshMessagePtr open) {
  const bool reverse =
      kind == ChannelPair::Kind::kForwardedTcpip || kind == ChannelPair::Kind::kAgent;
  // The twin on the other side; opened by the pair's first Progress.
  SshChannelPtr twin(ssh_channel_new(reverse ? client_ : upstream_));
  if (twin == nullptr) {
    ssh_message_reply_default(open.get());
    return;
  }
  auto p = std::make_unique<ChannelPair>();
  p->kind = kind;
  p->reverse = reverse;
  (reverse ? p->client : p->upstream) = std::move(twin);
  if (kind == ChannelPair::Kind::kDirectTcpip || kind == ChannelPair::Kind::kForwardedTcpip) {
    const char* d = ssh_message_channel_request_open_destination(open.get());
    const char* o = ssh_message_channel_request_open_originator(open.get());
    p->dest_host = d ? d : "";
    p->orig_host = o ? o : "127.0.0.1";
    p->dest_port = ssh_message_channel_request_open_destination_port(open.get());
    p->orig_port = ssh_message_channel_request_open_originator_port(open.get());
  }
  p->open_msg = std::move(open);
  ChannelPair& ref = *p;
  pairs_.push_back(std::move(p));
  Advance(ref);
}

bool ChannelForwarding::Advance(ChannelPair& pair) {
  if (!violation_.empty()) return false;
  const bool work = pair.Progress(bytes_, limits_);
  if (pair.agent_forwarded) agent_forwarded_ = true;
  if (!pair.violation.empty()) violation_ = pair.violation;
  return work;
}

bool ChannelForwarding::GlobalProgress() {
  bool work = false;
  while (!globals_.empty()) {
    ssh_message msg = globals_.front().get();
    const char* addr = ssh_message_global_request_address(msg);
    const int port = ssh_message_global_request_port(msg);
    const bool forward = ssh_message_subtype(msg) == SSH_GLOBAL_REQUEST_TCPIP_FORWARD;
    int bound = 0;
    int rc = forward ? ssh_channel_listen_forward(upstream_, addr, port, &bound)
                     : ssh_channel_cancel_forward(upstream_, addr, port);
    if (rc == SSH_AGAIN) return work;
    if (rc == SSH_OK) {
      if (forward) {
        ++remote_forwards_;
      } else if (remote_forwards_ > 0) {
        --remote_forwards_;
      }
      ssh_message_global_request_reply_success(msg, static_cast<uint16_t>(bound));
    } else {
      ssh_message_reply_default(msg);
    }
    globals_.pop_front();
    work = true;
  }
  return work;
}

bool ChannelForwarding::Progress() {
  if (!violation_.empty()) return false;
  bool work = GlobalProgress();
  for (auto& p : pairs_) work |= Advance(*p);
  return work;
}

void ChannelForwarding::RemoveFinished() {
  std::erase_if(pairs_, [](const std::unique_ptr<ChannelPair>& p) { return p->Settled(); });
}

void ChannelForwarding::NotifyClient(const std::string& text) {
  const std::string line = "\r\n" + text + "\r\n";
  for (auto& p : pairs_) {
    if (!p->CanNotifyClient()) continue;
    ssh_channel_write_stderr(p->client.get(), line.data(), static_cast<uint32_t>(line.size()));
  }
}

void ChannelForwarding::CloseAll() {
  for (auto& p : pairs_) {
    if (p->client != nullptr && !p->client_closed) ssh_channel_close(p->client.get());
    p.reset();
  }
  pairs_.clear();
  globals_.clear();
}

}  // namespace gpuwerk::relay::internal
