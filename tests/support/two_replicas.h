// Two replicas' leader electors on one database, for the tests of leader-only work (queue
// dispatch, the outbox sender; docs/scale-out.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "store/database.h"
#include "store/leader_elector.h"

namespace gpuwerk::testing {

/// Replicas "replica-a" and "replica-b" electing for the "scheduler" lease (10 s, renewed every
/// 3 s) on `db`, on a lease clock the test moves (`lease_ms`, Unix milliseconds) and steady clocks
/// that never move, so that only `lease_ms` decides who leads. Neither has stepped yet.
class TwoReplicaElectors {
 public:
  explicit TwoReplicaElectors(store::Database& db)
      : a(db, Options("replica-a")), b(db, Options("replica-b")) {}

  std::atomic<int64_t> lease_ms{1'800'000'000'000};
  store::LeaderElector a;
  store::LeaderElector b;

 private:
  store::LeaderElectorOptions Options(const std::string& holder) {
    return store::LeaderElectorOptions{
        .name = "scheduler",
        .holder = holder,
        .lease = std::chrono::milliseconds(10'000),
        .renew_every = std::chrono::milliseconds(3'000),
        .clock = [this](store::Transaction&) -> core::Result<int64_t> { return lease_ms.load(); },
        .steady_ms = [] { return int64_t{0}; },
        .on_gain = {}};
  }
};

}  // namespace gpuwerk::testing
