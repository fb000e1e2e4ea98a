#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace gpuwerk::relay::internal {

/// Per-source-address admission for the relay's accept loop: open connections (all sources and
/// per source) and recent authentication failures per source. Thread-safe.
class SourceLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  SourceLimiter(int max_total, int max_per_source, int max_failures_per_source,
                std::chrono::seconds failure_window)
      : max_total_(max_total),
        max_per_source_(max_per_source),
        max_failures_(max_failures_per_source),
        window_(failure_window) {}

  /// Admits one more connection from `source` unless a limit is reached; pair with Release.
  bool TryAcquire(const std::string& source, Clock::time_point now = Clock::now());
  void Release(const std::string& source);
  /// One failed authentication from `source` (counts towards max_failures_per_source).
  void RecordAuthFailure(const std::string& source, Clock::time_point now = Clock::now());
  int open_total() const;

 private:
  void Prune(const std::string& source, Clock::time_point now);

  const int max_total_;
  const int max_per_source_;
  const int max_failures_;
  const std::chrono::seconds window_;
  mutable std::mutex mu_;
  int total_ = 0;
  std::map<std::string, int> open_;
  std::map<std::string, std::deque<Clock::time_point>> failures_;
};

}  // namespace gpuwerk::relay::internal
