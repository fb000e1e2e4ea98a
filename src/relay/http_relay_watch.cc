#include "relay/http_relay_watch.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/strings.h"
#include "protocol/relay_messages.h"
#include "protocol/sse_parser.h"

namespace gpuwerk::relay {

HttpRelayWatch::HttpRelayWatch(Options options, Relay& relay)
    : options_(std::move(options)),
      relay_(relay),
      api_(protocol::ApiClient::ForService(options_.server_url, options_.token, "gpuwerk-relay",
                                           options_.connect_timeout)) {
  api_.SetCancelFlag(&stopping_);
}

HttpRelayWatch::~HttpRelayWatch() { Stop(); }

void HttpRelayWatch::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void HttpRelayWatch::Stop() {
  {
    std::lock_guard lock(mu_);  // so that a Pause about to wait sees it
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

HttpRelayWatch::Stats HttpRelayWatch::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool HttpRelayWatch::Pause(std::chrono::milliseconds delay) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, delay, [this] { return stopping_.load(); });
  return !stopping_;
}

void HttpRelayWatch::Run() {
  auto delay = options_.reconnect_delay;
  bool was_connected = false;  // the last attempt had a stream open
  while (!stopping_) {
    protocol::SseParser parser;
    bool opened = false;
    auto sink = [&](std::string_view bytes) {
      if (!opened) {
        opened = true;
        {
          std::lock_guard lock(mu_);
          ++stats_.streams_opened;
          stats_.connected = true;
        }
        // Changes made while no stream was open were missed: ask about everything once.
        if (was_connected) relay_.RecheckAllRelaySessions();
        spdlog::info("relay: watching {} for access changes", options_.server_url);
      }
      for (const auto& event : parser.Feed(bytes)) {
        if (event.type != "access") continue;
        const auto json = nlohmann::json::parse(event.data, nullptr, /*allow_exceptions=*/false);
        auto change = protocol::RelayAccessChangeFromJson(json);
        if (!change) {
          spdlog::warn("relay: ignored an access change not understood: {}",
                       core::BoundedPrintable(change.error().message));
          continue;
        }
        {
          std::lock_guard lock(mu_);
          ++stats_.changes;
        }
        relay_.RecheckRelaySessions({.instance_ids = std::move(change->instance_ids),
                                     .person_ids = std::move(change->person_ids),
                                     .key_fingerprints = std::move(change->key_fingerprints),
                                     .reason = core::BoundedPrintable(change->reason)});
      }
      return !stopping_;
    };
    auto end = api_.Stream(kPath, {"Accept: text/event-stream"}, sink, options_.idle_timeout);
    if (stopping_) break;
    const bool refused = end && (end->response.status == 401 || end->response.status == 403);
    {
      std::lock_guard lock(mu_);
      stats_.connected = false;
      if (opened || refused) ++stats_.breaks;
    }
    if (opened || refused || was_connected) {
      // The server may be gone, or the relay's token revoked: find out now, not at the next
      // backstop re-check (each failed re-check counts towards max_failed_rechecks).
      relay_.RecheckAllRelaySessions();
    }
    if (opened) {
      delay = options_.reconnect_delay;
      spdlog::warn("relay: the access-change stream from {} ended ({}); reconnecting",
                   options_.server_url,
                   end ? "closed by the server" : core::BoundedPrintable(end.error().message));
    } else if (refused) {
      spdlog::error("relay: the server at {} refused the relay's token for {} ({})",
                    options_.server_url, kPath, end->response.status);
    } else if (!end) {
      spdlog::debug("relay: cannot open the access-change stream: {}",
                    core::BoundedPrintable(end.error().message));
    }
    was_connected = opened;
    if (!Pause(delay)) break;
    if (!opened) delay = std::min(delay * 2, options_.max_reconnect_delay);
  }
  std::lock_guard lock(mu_);
  stats_.connected = false;
}

}  // namespace gpuwerk::relay
