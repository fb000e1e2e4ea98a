#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "sched/host_registry.h"
#include "sched/sched_options.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// The server half of docs/agent-protocol.md (v1): one sync round of one host's agent.
/// Thread-safe (state lives in the store).
class AgentSync {
 public:
  /// Called with a host's GPU type and id after a sync that left the host free (a failure or a
  /// finished delete freed it, or it had nothing placed): capacity may be there for the queue
  /// (QueueService::Drain(gpu_type, {host_id})). Runs on the syncing thread after the commit.
  using CapacityFreed =
      std::function<void(const std::string& gpu_type, const std::string& host_id)>;

  AgentSync(store::Database& db, core::Clock& clock, core::Rng& rng, SchedOptions options,
            CapacityFreed capacity_freed = {})
      : db_(db),
        clock_(clock),
        rng_(rng),
        options_(std::move(options)),
        capacity_freed_(std::move(capacity_freed)) {}

  /// In one transaction: records the host's last_seen_at, inventory and engine error; stores
  /// the observed containers of instances placed on `host`; marks instances whose creation
  /// failed `failed` (placement freed, billing session ended) and puts the queue entry they were
  /// launched from back at its old place with the failure recorded (R-11, issue 5); finally deletes
  /// instances whose deletion was asked and whose containers are gone; derives every live
  /// instance's status on the host. Returns the response object: host_id, sync_interval_seconds and
  /// the desired list. Malformed container or failure entries are skipped, never trusted. Errors:
  /// kInvalidArgument invalid_field when `request` is not an object of the right shape.
  core::Result<nlohmann::json> Sync(const Host& host, const nlohmann::json& request);

 private:
  /// The answer: host id, sync interval and the host's desired list (within `tx`).
  core::Result<nlohmann::json> DesiredAnswer(store::Transaction& tx, const Host& host);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  SchedOptions options_;
  CapacityFreed capacity_freed_;
};

}  // namespace gpuwerk::sched
