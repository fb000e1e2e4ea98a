#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "protocol/api_client.h"
#include "protocol/relay_messages.h"
#include "relay/relay_session_log.h"

namespace gpuwerk::relay {

/// The body of `PUT /api/v1/relay/sessions/{id}` for `record` (protocol::RelaySessionReport;
/// docs/ssh.md "The remote relay's reports"): times as RFC 3339 UTC, ended_at unset while open,
/// byte counts capped at INT64_MAX, no `relay` (the server files it under the name of the relay's
/// credential). `ended`: whether the record is an end.
protocol::RelaySessionReport ToWire(const RelaySessionRecord& record, bool ended);

/// How an HttpRelaySessionLog reaches the server and how hard it tries.
struct HttpRelaySessionLogOptions {
  std::string server_url;  ///< the control plane's base URL, e.g. "https://gpuwerk.example.com"
  /// The relay's credential ("gwr_…", as for HttpRelayAuthorizer); it names the relay, so the
  /// reports carry no name of their own.
  std::string token;
  std::chrono::milliseconds request_timeout{5'000};  ///< per HTTP request
  std::chrono::milliseconds initial_backoff{500};    ///< wait after the first failed attempt
  std::chrono::milliseconds max_backoff{30'000};     ///< the wait doubles up to this
  size_t max_queued = 10'000;  ///< reports held while the server is away; the oldest go first
  std::chrono::milliseconds drain_timeout{5'000};  ///< how long Stop keeps sending
  /// Refusals (OnRefused) are gathered this long, then reported in one request (and at Stop).
  std::chrono::milliseconds refusal_interval{60'000};
};

/// What an HttpRelaySessionLog has done so far (tests, logs).
struct HttpRelaySessionLogStats {
  uint64_t sent = 0;             ///< reports the server accepted (the announcement included)
  uint64_t failed_attempts = 0;  ///< requests that failed and were retried
  uint64_t dropped = 0;    ///< reports given up: queue full, refused for good, or left at Stop
  size_t queued = 0;       ///< reports waiting now (the one in flight included)
  bool announced = false;  ///< the server acknowledged `POST /api/v1/relay/restarted`
  uint64_t refusals = 0;   ///< OnRefused calls so far
  uint64_t refusal_reports = 0;   ///< `POST /api/v1/relay/refusals` the server accepted
  uint64_t refusals_dropped = 0;  ///< refusals that fitted in no group (kMaxRefusalGroups)
  /// The name the server files this relay's relay sessions under (its credential's), as the
  /// restart announcement's answer said; "" until then.
  std::string relay_name;
};

/// The RelaySessionLog of a remote `gpuwerk relay`: reports every relay session's start and end
/// to the control plane, which stores them (access::RelaySessionRow) and lists them over the API.
///
/// Protocol (docs/ssh.md), with `Authorization: Bearer <relay credential>`:
/// - first, once per process: `POST {server}/api/v1/relay/restarted {}`. The server closes the
///   rows this relay (the name of its credential, which the answer `{"relay", "closed"}` gives
///   and the log line states) left open (a crash or a kill reported no end) with the reason
///   "relay restarted". It is sent before any report, so it never closes a row of this process.
/// - then per record: `PUT {server}/api/v1/relay/sessions/{record.id}` with
///   the report (ToWire): at start (ended_at null), and at the end (the final bytes and
///   reason). The server's upsert is idempotent, so a retried report never makes a second row.
///
/// OnStart/OnEnd only queue (a mutex and a deque; never I/O): one background thread sends in
/// order, retrying a failed request (no answer, 401/403, 408, 429, 5xx) after a back-off that
/// doubles from `initial_backoff` to `max_backoff` while the server is away, and resuming at once
/// when it answers. A report the server refuses for good (another 4xx) is logged and dropped. An
/// end whose start is still queued replaces it (one request instead of two). When `max_queued`
/// reports wait, the oldest is dropped and counted.
///
/// Refusals (OnRefused; docs/ssh.md "Refusals of a remote relay") are gathered for
/// `refusal_interval` into groups that agree in everything but the count and times
/// (protocol::RelayRefusalGroup): at most protocol::kMaxRefusalGroups groups a period, more
/// refusals are only counted (`dropped`). Then one `POST {server}/api/v1/relay/refusals` carries
/// the period (queued behind the reports before it; at Stop, what was gathered is sent with the
/// drain). So a flood of refused logins costs the server one request and at most 101 audit
/// events a minute. A refusal report the server refuses with 429 is dropped, not retried (the
/// next period's comes anyway).
///
/// Thread-safe. The sender thread blocks every signal, so a process that waits for SIGINT with
/// sigwait (relay::RunRelayUntilSignal) still gets it.
class HttpRelaySessionLog final : public RelaySessionLog {
 public:
  explicit HttpRelaySessionLog(HttpRelaySessionLogOptions options);
  /// Stop().
  ~HttpRelaySessionLog() override;

  HttpRelaySessionLog(const HttpRelaySessionLog&) = delete;
  HttpRelaySessionLog& operator=(const HttpRelaySessionLog&) = delete;

  /// Queues the restart announcement ahead of everything and starts the sender thread. Call it
  /// once, before the relay starts. Records queued before Start wait for it.
  void Start();
  /// Sends what is queued for at most `drain_timeout` (stop the Relay first, so the last ends
  /// are queued), then drops the rest (logged, counted) and joins the thread. Idempotent.
  void Stop();

  void OnStart(const RelaySessionRecord& record) override;
  void OnEnd(const RelaySessionRecord& record) override;
  void OnRefused(const RelayRefusalRecord& record) override;

  HttpRelaySessionLogStats Stats() const;
  /// Waits until nothing is queued or in flight; false when `limit` passed first (tests).
  bool WaitUntilIdle(std::chrono::milliseconds limit) const;

  static constexpr const char* kSessionsPath = "/api/v1/relay/sessions/";
  static constexpr const char* kRestartedPath = "/api/v1/relay/restarted";
  static constexpr const char* kRefusalsPath = "/api/v1/relay/refusals";

 private:
  struct Item {
    bool announcement = false;  ///< POST …/restarted rather than a PUT of `record`
    bool ended = false;
    RelaySessionRecord record;
    std::optional<protocol::RelayRefusalReport> refusals;  ///< POST …/refusals of this
  };
  enum class Outcome { kDone, kRetry, kDrop };

  void Enqueue(Item item);
  /// Queues the gathered refusals as one report (mu_ held) when their period is over, or when
  /// stopping; clears them.
  void FlushRefusalsLocked(std::chrono::steady_clock::time_point now);
  void Run();
  Outcome Send(const Item& item);

  HttpRelaySessionLogOptions options_;
  protocol::ApiClient api_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;  ///< new work, stop, or (for WaitUntilIdle) progress
  std::deque<Item> queue_;
  bool in_flight_ = false;  ///< queue_.front() is being sent (not to be replaced or dropped)
  bool started_ = false;
  bool stopping_ = false;
  bool stopped_ = false;  ///< Stop has finished: later records are dropped
  std::chrono::steady_clock::time_point drain_deadline_;
  HttpRelaySessionLogStats stats_;
  /// This period's refusal groups, by their fields (code, source, user, key, person, instance,
  /// host keys), and the refusals that fitted in none.
  std::map<std::string, protocol::RelayRefusalGroup> refusal_groups_;
  int64_t refusals_dropped_ = 0;
  /// When this period's refusals go (unset while none was gathered).
  std::optional<std::chrono::steady_clock::time_point> refusal_flush_at_;
  std::thread thread_;
};

}  // namespace gpuwerk::relay
