#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpuwerk::sched {

/// Tells waiting agents that their host's desired state changed, so that a launch, restart or
/// delete reaches the host at once instead of at its next periodic sync (the agent's long poll,
/// `GET /api/v1/agent/watch`, docs/agent-protocol.md).
///
/// Each host (by name) has a version: an opaque number that changes whenever Notify names the
/// host. Versions are only compared for equality; they start from a value drawn at construction,
/// so a version from before a server restart never matches one after it (a restarted server
/// wakes every watcher once). The notifier is in-memory and per process: with several server
/// replicas a change made on another replica is seen at the agent's next periodic sync.
///
/// Thread-safety: all members may be called from any thread. Callbacks run on the thread that
/// calls Notify or Shutdown, or on the notifier's timer thread, without the notifier's lock held;
/// they must be quick (e.g. post a response to an I/O thread).
class DesiredStateNotifier {
 public:
  using Callback = std::function<void(uint64_t version)>;

  DesiredStateNotifier();
  /// Shutdown(), then joins the timer thread.
  ~DesiredStateNotifier();
  DesiredStateNotifier(const DesiredStateNotifier&) = delete;
  DesiredStateNotifier& operator=(const DesiredStateNotifier&) = delete;

  /// The host's current version.
  uint64_t Version(const std::string& host);

  /// Gives each named host a new version and calls every callback waiting on it.
  void Notify(const std::vector<std::string>& hosts);

  /// Calls `done` exactly once with the host's version: at once (on this thread) when it differs
  /// from `known` or the notifier is shut down; else at the next Notify of the host, or after
  /// `max_wait` with the unchanged version.
  void Wait(const std::string& host, uint64_t known, std::chrono::milliseconds max_wait,
            Callback done);

  /// Calls every waiting callback now (with the unchanged version) and makes later Waits return
  /// at once. Idempotent.
  void Shutdown();

  /// How many callbacks are waiting (metrics, tests).
  size_t waiting();

 private:
  struct Waiter {
    uint64_t id;
    std::string host;
    std::chrono::steady_clock::time_point deadline;
    Callback done;
  };
  uint64_t VersionLocked(const std::string& host);
  void TimerLoop();

  std::mutex mu_;
  std::condition_variable timer_cv_;
  uint64_t epoch_;         // the version of a host never notified
  uint64_t next_version_;  // the next version handed out
  uint64_t next_waiter_ = 1;
  std::map<std::string, uint64_t> versions_;  // by host name
  std::map<uint64_t, Waiter> waiters_;        // by waiter id
  bool shut_down_ = false;
  std::thread timer_;
};

}  // namespace gpuwerk::sched
