#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "protocol/api_client.h"
#include "relay/relay.h"

namespace gpuwerk::relay {

/// The push path of a remote relay (docs/ssh.md "Revocation"): holds `GET
/// {server_url}/api/v1/relay/watch` open (server-sent events, WHATWG HTML §9.2, parsed by
/// protocol::SseParser) with the relay's credential ("gwr_…"), and for every `event: access`
/// (protocol::RelayAccessChange) has the Relay re-check exactly the relay sessions it names
/// (Relay::RecheckRelaySessions). Whenever a stream that was open ends, or an attempt is refused
/// (401/403), it has the Relay re-check all its relay sessions at once
/// (Relay::RecheckAllRelaySessions): the server may be gone (the re-checks then fail, and after
/// RelayOptions::max_failed_rechecks the relay sessions end) or the credential revoked (the
/// re-check's 401 ends them all). It reconnects after `reconnect_delay`, doubling up to
/// `max_reconnect_delay` while attempts fail; a stream quiet for `idle_timeout` (the server sends a
/// heartbeat every 5 s) counts as broken.
///
/// Threading: one thread of its own between Start and Stop. `relay` must outlive the watch.
class HttpRelayWatch {
 public:
  struct Options {
    std::string server_url;
    std::string token;  ///< the relay's credential, "gwr_…"
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(20)};
    std::chrono::milliseconds reconnect_delay{std::chrono::seconds(1)};
    std::chrono::milliseconds max_reconnect_delay{std::chrono::seconds(30)};
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  };
  /// What the watch has done so far (tests, logs).
  struct Stats {
    uint64_t streams_opened = 0;  ///< answers 200 that started a stream
    uint64_t changes = 0;         ///< `access` events handed to the relay
    uint64_t breaks = 0;          ///< streams that ended, and refused attempts
    bool connected = false;       ///< a stream is open now
  };

  HttpRelayWatch(Options options, Relay& relay);
  /// Stop().
  ~HttpRelayWatch();
  HttpRelayWatch(const HttpRelayWatch&) = delete;
  HttpRelayWatch& operator=(const HttpRelayWatch&) = delete;

  void Start();
  /// Ends the stream (within about a second) and joins the thread. Idempotent.
  void Stop();
  Stats stats() const;

  static constexpr const char* kPath = "/api/v1/relay/watch";

 private:
  void Run();
  /// Waits `delay` unless stopping; false when stopping.
  bool Pause(std::chrono::milliseconds delay);

  Options options_;
  Relay& relay_;
  protocol::ApiClient api_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Stats stats_;
};

}  // namespace gpuwerk::relay
