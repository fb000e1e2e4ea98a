#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "api/http_types.h"
#include "core/access_change_feed.h"
#include "core/error.h"

namespace gpuwerk::api {

/// The streams of `GET /api/v1/relay/watch` (docs/ssh.md "Revocation"): remote relays hold one
/// open and hear, as server-sent events (WHATWG HTML Standard, "Server-sent events" §9.2), every
/// access change published to the server's core::AccessChangeFeed: `event: access` with data
/// protocol::RelayAccessChange (the instances, people and key fingerprints whose relay sessions
/// must be checked again at once). A stream starts with `retry: <retry ms>` and `: watching`,
/// and gets `: keep-alive` every `heartbeat_interval`, so a relay notices a dead server within
/// its idle timeout.
///
/// Each stream's StillAllowed (the relay's credential still admits it) is asked at every access
/// change and every heartbeat; once it says no, the stream ends, and the relay, which re-checks
/// all its relay sessions when its stream ends, learns at once that its credential is gone.
///
/// Threading: one thread of its own writes every stream; the feed's listener only queues.
/// Every member may be called from any thread.
class RelayWatchHub {
 public:
  struct Options {
    size_t max_streams = 64;  ///< open streams in all; one more gets 503 `too_many_streams`
    std::chrono::milliseconds heartbeat_interval = std::chrono::seconds(5);
    std::chrono::milliseconds retry = std::chrono::seconds(1);  ///< the stream's `retry:`
  };
  /// Whether the credentials a stream was opened with still admit it; false ends the stream.
  using StillAllowed = std::function<bool()>;
  using Producer = std::function<void(std::shared_ptr<ResponseStream>)>;

  /// Subscribes to `feed` (which must outlive the hub) and starts the hub's thread.
  RelayWatchHub(core::AccessChangeFeed& feed, Options options);
  explicit RelayWatchHub(core::AccessChangeFeed& feed) : RelayWatchHub(feed, Options{}) {}
  /// Shutdown(), then joins the thread.
  ~RelayWatchHub();
  RelayWatchHub(const RelayWatchHub&) = delete;
  RelayWatchHub& operator=(const RelayWatchHub&) = delete;

  /// A stream for one relay, to put in Response::stream. Errors: kUnavailable
  /// "too_many_streams" (503, `retry_after_seconds`) past max_streams; kUnavailable
  /// "shutting_down" after Shutdown().
  core::Result<Producer> Open(StillAllowed still_allowed);

  /// Asks every stream's StillAllowed now, on the hub's thread, and ends those no longer allowed
  /// (a relay credential was revoked: its relay's stream ends at once rather than at the next
  /// heartbeat). Only queues; returns at once.
  void CheckNow();

  /// Ends every stream and refuses new ones; unsubscribes from the feed. Idempotent.
  void Shutdown();

  size_t open_streams() const;

 private:
  struct Stream {
    std::shared_ptr<ResponseStream> out;
    StillAllowed still_allowed;
  };
  void Run();
  /// Sends `bytes` to every stream, then ends those no longer allowed (`check`) or ended.
  void Broadcast(const std::string& bytes, bool check);

  core::AccessChangeFeed& feed_;
  Options options_;
  uint64_t subscription_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_ = false;
  size_t reserved_ = 0;  ///< Open() given, producer not yet called or dropped
  std::vector<Stream> streams_;
  std::deque<std::string> pending_;  ///< events to send, already framed
  std::thread thread_;
};

}  // namespace gpuwerk::api
