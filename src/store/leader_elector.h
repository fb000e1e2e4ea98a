#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "store/database.h"
#include "store/leader_fence.h"
#include "store/leader_lease.h"

namespace gpuwerk::store {

/// Configuration of LeaderElector. Times are real (monotonic) time, measured against the lease
/// clock (the database's) only through the lease row.
struct LeaderElectorOptions {
  std::string name = "scheduler";  ///< the lease's name (its row in leader_leases)
  /// This replica's id, unique among the replicas: a process that starts with the id of one that
  /// is gone (the same data directory) takes its lease back at once, under a new epoch.
  std::string holder;
  /// How long a taken or renewed lease lasts: how long replicas wait for a leader that died.
  std::chrono::milliseconds lease{15000};
  /// How often the holder renews (and a follower tries to take over): well under `lease`.
  std::chrono::milliseconds renew_every{5000};
  /// The lease's time source; empty: the database's (DatabaseClock).
  LeaseClock clock;
  /// This process's monotonic time in milliseconds; empty: std::chrono::steady_clock. Tests
  /// inject one.
  std::function<int64_t()> steady_ms;
  /// Called on the elector's thread (or Step's caller) after this process became the leader.
  std::function<void()> on_gain;
};

/// Leader election over LeaderLease, and the fence of leader-only writes (docs/scale-out.md):
/// a thread takes or renews the lease every `renew_every`; Holding() is true until `lease` after
/// the start of the last renewal that kept it (a bound that ends before the lease's own expiry on
/// the database's clock, as the renewal's start precedes its read of that clock); Check() fences
/// a write transaction to the epoch held. Gains and losses are logged (with the other holder's id
/// escaped). Thread-safe.
class LeaderElector final : public LeaderFence {
 public:
  using Options = LeaderElectorOptions;
  /// `db` must outlive the elector. `options.holder` must not be empty.
  LeaderElector(Database& db, Options options);
  /// Stops the thread (Stop).
  ~LeaderElector() override;
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  /// One take-or-renew round, synchronously; returns Holding() after it. Errors: the store's
  /// (Holding() then runs out on its own).
  core::Result<bool> Step();
  /// Starts the thread: a Step every renew_every. No-op when running.
  void Start();
  /// Stops the thread and, when holding, gives the lease up (LeaderLease::Release) so that another
  /// replica takes over at once. Idempotent.
  void Stop();

  bool Holding() const override;
  core::Result<void> Check(Transaction& tx) const override;

  /// The epoch this process holds, or last held (0: never).
  int64_t epoch() const { return epoch_.load(); }
  /// This process's holder id.
  const std::string& holder() const { return options_.holder; }
  /// Times this process became the leader.
  int64_t gains_total() const { return gains_total_.load(); }
  /// Fence checks passed and refused (Check).
  int64_t fence_passed_total() const { return fence_passed_total_.load(); }
  int64_t fence_refused_total() const { return fence_refused_total_.load(); }

 private:
  int64_t SteadyMs() const;
  /// Logs a loss once when Holding() turned false since the last log line.
  void NoteLossIfAny(const std::string& why);

  Database& db_;
  Options options_;
  LeaseClock clock_;

  std::atomic<int64_t> epoch_{0};
  std::atomic<int64_t> valid_until_ms_{0};  ///< on SteadyMs(); Holding() while before it
  std::atomic<bool> announced_{false};      ///< a gain was logged and no loss since
  std::atomic<int64_t> gains_total_{0};
  mutable std::atomic<int64_t> fence_passed_total_{0};
  mutable std::atomic<int64_t> fence_refused_total_{0};

  std::mutex step_mu_;  ///< one Step at a time
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

/// A Database whose write transactions begin with `fence.Check` (its first statement): every
/// write through it is a leader-only write, refused with "not_leader" once this process no longer
/// holds the lease at its epoch. Reads pass through. For the services only the leader runs
/// (marking silent hosts, the month close and invoice pushes, the outbox sender). `inner` and
/// `fence` must outlive it. Thread-safe.
class FencedDatabase final : public Database {
 public:
  FencedDatabase(Database& inner, const LeaderFence& fence) : inner_(inner), fence_(fence) {}
  core::Result<std::unique_ptr<Transaction>> Begin(TxMode mode) override;
  std::string_view Backend() const override { return inner_.Backend(); }
  int ConflictRetries() const override { return inner_.ConflictRetries(); }
  void BeforeRetry(int attempt) override { inner_.BeforeRetry(attempt); }

 private:
  Database& inner_;
  const LeaderFence& fence_;
};

}  // namespace gpuwerk::store
