#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpuwerk::core {

/// Wall-clock time source, injected everywhere so tests control time. Thread-safe.
class Clock {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  virtual ~Clock() = default;
  /// The current UTC time.
  virtual TimePoint Now() const = 0;
  /// The current time as whole seconds since the Unix epoch (how the store keeps times).
  int64_t NowUnix() const {
    return std::chrono::duration_cast<std::chrono::seconds>(Now().time_since_epoch()).count();
  }
};

/// The real clock.
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::system_clock::now(); }
};

/// A clock tests move by hand. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_unix_seconds = 1'800'000'000)
      : now_us_(start_unix_seconds * 1'000'000) {}
  TimePoint Now() const override { return TimePoint(std::chrono::microseconds(now_us_.load())); }
  /// Moves time forward by `d`.
  void Advance(std::chrono::microseconds d) { now_us_ += d.count(); }

 private:
  std::atomic<int64_t> now_us_;
};

}  // namespace gpuwerk::core
