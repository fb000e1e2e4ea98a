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
/// Listeners (AddListener) hear of every Notify too, e.g. to tell people's open event streams
/// (`GET /api/v1/events`) that an instance may have changed.
///
/// Thread-safety: all members may be called from any thread. Callbacks run on the thread that
/// calls Notify or Shutdown, or on the notifier's timer thread, without the notifier's lock held;
/// they must be quick (e.g. post a response to an I/O thread).
class DesiredStateNotifier {
 public:
  using Callback = std::function<void(uint64_t version)>;
  /// Hears the host names of one Notify call.
  using Listener = std::function<void(const std::vector<std::string>& hosts)>;

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

  /// Calls `listener` after every later Notify (after the waiters it woke), on the notifying
  /// thread, with the hosts it named. Listeners must be quick and must not call AddListener,
  /// RemoveListener or Notify. Returns an id for RemoveListener.
  uint64_t AddListener(Listener listener);
  /// Stops calling the listener `id`; when this returns, no call of it is running or will start.
  /// Unknown ids are ignored.
  void RemoveListener(uint64_t id);

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
  // Listeners are called with listeners_mu_ held (so RemoveListener can wait for a running call);
  // never nested inside mu_.
  std::mutex listeners_mu_;
  uint64_t next_listener_ = 1;
  std::map<uint64_t, Listener> listeners_;
  std::thread timer_;
};

}  // namespace gpuwerk::sched
