#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http_types.h"

namespace gpuwerk::api::internal {

class Connection;

/// Whether work may still be posted to the server's io_context: streams outlive their
/// connection's threads (a producer may write after Stop), so they check this first. Cleared,
/// under `mu`, once Stop() has joined the I/O threads.
struct Liveness {
  std::mutex mu;
  bool alive = true;
};

/// The ResponseStream a streamed response writes to (see Response::stream). Shared by the
/// producer (any thread) and the Connection (its strand); the bytes in between are guarded by
/// `mu_`.
class StreamChannel final : public ResponseStream {
 public:
  StreamChannel(std::weak_ptr<Connection> connection, std::shared_ptr<Liveness> liveness,
                size_t limit)
      : connection_(std::move(connection)), liveness_(std::move(liveness)), limit_(limit) {}

  bool Write(std::string bytes) override {
    std::unique_lock lock(mu_);
    if (ended_) return false;
    if (bytes.empty()) return true;
    if (queued_.size() + in_flight_ + bytes.size() > limit_) {
      aborted_ = true;
      queued_.clear();
      Finish(lock, "overflow");  // unlocks
      return false;
    }
    queued_ += bytes;
    const bool kick = !kick_posted_;
    kick_posted_ = true;
    lock.unlock();
    if (kick) Kick();
    return true;
  }

  void End() override {
    std::unique_lock lock(mu_);
    if (ended_) return;
    end_requested_ = true;
    Finish(lock, "end");
  }

  bool ended() const override {
    std::lock_guard lock(mu_);
    return ended_;
  }

  void OnEnd(std::function<void()> on_end) override {
    if (!on_end) return;
    {
      std::lock_guard lock(mu_);
      if (!ended_) {
        on_end_.push_back(std::move(on_end));
        return;
      }
    }
    on_end();
  }

  // ---- for the Connection, on its strand ----

  /// What the Connection should do next.
  struct Next {
    std::string bytes;    ///< body bytes to send now (may be empty)
    bool finish = false;  ///< nothing more will come: send the last chunk and close
    bool abort = false;   ///< close without sending more
  };
  /// Takes what is queued (counting it as in flight until Sent()).
  Next Take() {
    std::lock_guard lock(mu_);
    kick_posted_ = false;
    Next next;
    if (aborted_) {
      next.abort = true;
      return next;
    }
    next.bytes = std::move(queued_);
    queued_.clear();
    in_flight_ += next.bytes.size();
    next.finish = end_requested_ && next.bytes.empty();
    return next;
  }
  /// `n` bytes taken by Take() are written to the socket.
  void Sent(size_t n) {
    std::lock_guard lock(mu_);
    in_flight_ -= std::min(n, in_flight_);
    sent_total_ += n;
  }
  /// Ends the stream from the server's side. `graceful`: what is queued is still sent, then the
  /// last chunk (the server is stopping, HEAD); otherwise the connection is closed as it is.
  void EndFromServer(std::string_view reason, bool graceful) {
    std::unique_lock lock(mu_);
    if (ended_) {
      if (!graceful) aborted_ = true;
      return;
    }
    if (graceful) {
      end_requested_ = true;
    } else {
      aborted_ = true;
      queued_.clear();
    }
    Finish(lock, reason);
  }
  /// Why the stream ended ("" while open) and how many body bytes were sent.
  std::pair<std::string, uint64_t> Outcome() const {
    std::lock_guard lock(mu_);
    return {end_reason_, sent_total_};
  }

 private:
  /// Marks the stream ended with `reason`, unlocks, runs the OnEnd callbacks and wakes the
  /// Connection so that it finishes.
  void Finish(std::unique_lock<std::mutex>& lock, std::string_view reason) {
    ended_ = true;
    end_reason_ = std::string(reason);
    std::vector<std::function<void()>> callbacks = std::move(on_end_);
    on_end_.clear();
    const bool kick = !kick_posted_;
    kick_posted_ = true;
    lock.unlock();
    for (auto& callback : callbacks) callback();
    if (kick) Kick();
  }
  /// Posts a Flush to the Connection's strand (defined after Connection).
  void Kick();

  const std::weak_ptr<Connection> connection_;
  const std::shared_ptr<Liveness> liveness_;
  const size_t limit_;
  mutable std::mutex mu_;
  std::string queued_;
  size_t in_flight_ = 0;
  uint64_t sent_total_ = 0;
  bool ended_ = false;          // no more writes are accepted
  bool end_requested_ = false;  // finish after flushing what is queued
  bool aborted_ = false;        // close without flushing
  bool kick_posted_ = false;    // a Flush is sure to run (posted, or after the write in flight)
  std::string end_reason_;
  std::vector<std::function<void()>> on_end_;
};

}  // namespace gpuwerk::api::internal
