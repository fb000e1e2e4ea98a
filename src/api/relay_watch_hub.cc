#include "api/relay_watch_hub.h"

#include <algorithm>

#include "protocol/relay_messages.h"

namespace gpuwerk::api {

RelayWatchHub::RelayWatchHub(core::AccessChangeFeed& feed, Options options)
    : feed_(feed), options_(options) {
  subscription_ = feed_.Subscribe([this](const core::AccessChange& c) {
    const protocol::RelayAccessChange wire{.instance_ids = c.instance_ids,
                                           .person_ids = c.person_ids,
                                           .key_fingerprints = c.key_fingerprints,
                                           .reason = c.reason};
    std::string frame = "event: access\ndata: " + protocol::ToJson(wire).dump() + "\n\n";
    {
      std::lock_guard lock(mu_);
      if (shutdown_) return;
      pending_.push_back(std::move(frame));
    }
    cv_.notify_all();
  });
  thread_ = std::thread([this] { Run(); });
}

RelayWatchHub::~RelayWatchHub() {
  Shutdown();
  if (thread_.joinable()) thread_.join();
}

void RelayWatchHub::Shutdown() {
  std::vector<Stream> ending;
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return;
    shutdown_ = true;
    ending.swap(streams_);
  }
  feed_.Unsubscribe(subscription_);
  cv_.notify_all();
  for (auto& s : ending) s.out->End();
}

void RelayWatchHub::CheckNow() {
  {
    std::lock_guard lock(mu_);
    if (shutdown_) return;
    // A comment line (ignored by the relay's parser): every queued frame is sent, then each
    // stream's StillAllowed is asked.
    pending_.push_back(": credentials changed\n\n");
  }
  cv_.notify_all();
}

size_t RelayWatchHub::open_streams() const {
  std::lock_guard lock(mu_);
  return streams_.size() + reserved_;
}

core::Result<RelayWatchHub::Producer> RelayWatchHub::Open(StillAllowed still_allowed) {
  {
    std::lock_guard lock(mu_);
    if (shutdown_) {
      return core::Fail(core::ErrorCode::kUnavailable, "shutting_down",
                        "The server is stopping; connect again in a moment.");
    }
    if (streams_.size() + reserved_ >= options_.max_streams) {
      return core::Fail(core::Error(core::ErrorCode::kUnavailable, "too_many_streams",
                                    "Too many relays are watching this server; try again later.")
                            .WithDetail("retry_after_seconds", 10));
    }
    ++reserved_;
  }
  // The reservation goes with the producer: released when it runs, or when it is dropped.
  struct Reservation {
    RelayWatchHub* hub = nullptr;
    bool held = true;
    void Release() {
      if (!held) return;
      held = false;
      std::lock_guard lock(hub->mu_);
      --hub->reserved_;
    }
    ~Reservation() { Release(); }
  };
  auto reservation = std::make_shared<Reservation>();
  reservation->hub = this;
  return Producer([this, reservation, still_allowed = std::move(still_allowed)](
                      std::shared_ptr<ResponseStream> out) mutable {
    out->Write("retry: " + std::to_string(options_.retry.count()) + "\n: watching\n\n");
    bool end = false;
    {
      std::lock_guard lock(mu_);
      if (shutdown_) {
        end = true;
      } else {
        streams_.push_back({out, std::move(still_allowed)});
      }
    }
    reservation->Release();
    if (end) out->End();
  });
}

void RelayWatchHub::Broadcast(const std::string& bytes, bool check) {
  std::vector<Stream> now;
  {
    std::lock_guard lock(mu_);
    now = streams_;
  }
  std::vector<const ResponseStream*> gone;
  for (auto& s : now) {
    bool ok = s.out->Write(bytes);
    if (ok && check && s.still_allowed && !s.still_allowed()) {
      s.out->End();
      ok = false;
    }
    if (!ok || s.out->ended()) gone.push_back(s.out.get());
  }
  if (gone.empty()) return;
  std::lock_guard lock(mu_);
  std::erase_if(streams_, [&](const Stream& s) {
    return std::find(gone.begin(), gone.end(), s.out.get()) != gone.end();
  });
}

void RelayWatchHub::Run() {
  auto next_beat = std::chrono::steady_clock::now() + options_.heartbeat_interval;
  while (true) {
    std::deque<std::string> events;
    {
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, next_beat, [&] { return shutdown_ || !pending_.empty(); });
      if (shutdown_) return;
      events.swap(pending_);
    }
    // Each change is also a moment to ask whether every stream's credential still holds (a
    // deleted API token publishes a change: its relay's stream ends at once).
    for (const auto& e : events) Broadcast(e, /*check=*/true);
    if (std::chrono::steady_clock::now() >= next_beat) {
      Broadcast(": keep-alive\n\n", /*check=*/true);
      next_beat = std::chrono::steady_clock::now() + options_.heartbeat_interval;
    }
  }
}

}  // namespace gpuwerk::api
