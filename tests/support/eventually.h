#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace gpuwerk::testing {

/// Polls `pred` every `every` until it holds or `limit` (wall clock) has passed; whether it held.
/// For tests that wait on real processes, engines or sockets; unit tests drive a FakeClock
/// instead.
inline bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit,
                       std::chrono::milliseconds every = std::chrono::milliseconds(200)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

}  // namespace gpuwerk::testing
