#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/container_engine.h"
#include "agent/reconciler.h"
#include "protocol/agent_sync.h"

namespace gpuwerk::agent {

/// One entry of the sync request's `drift` (docs/agent-protocol.md "Drift").
using DriftReport = protocol::DriftReport;

/// What the agent saw of one container it owns at its last observation (Agent::Observe).
struct KnownContainer {
  std::string container_id;
  std::string name;
  std::string image;
  ContainerState state = ContainerState::kUnknown;
  std::string started_at;
  /// Running and ready (its sshd accepted the person's key, or showed its banner when there is
  /// no key to prove) at that observation: it served its person.
  bool ready = false;
  int64_t memory_bytes = 0;
  int64_t nano_cpus = 0;
  int64_t pids_limit = 0;
  /// Only its id is known (from the agent's state file after an agent restart): only a removal
  /// can be told.
  bool id_only = false;
};

/// The containers the agent saw last, by (instance, node).
using KnownContainers = std::map<ContainerKey, KnownContainer>;

/// What changed in the agent's containers behind its back between two observations
/// (docs/agent-protocol.md "Drift"). `before`: the last observation; `now`: this one (as
/// inspected); `touched`: the ids of containers the agent itself started, restarted or removed
/// since the last observation, and `started_lately`: those it started or restarted in the last
/// 30 s (an engine may carry out a restart after answering it): its own steps are never drift.
/// `desired`: the host's desired list (only containers of desired (instance, node)s can drift:
/// the agent removes the others itself). Per desired (instance, node) known before:
///   - its container is no longer on the engine (not touched): "removed"; `recreated` stays false
///     (the agent sets it once its create succeeded);
///   - it was running and ready and is now created, exited or dead (neither touched nor started
///     lately): "stopped", with the exit code, the OOM flag and the finish time;
///   - it was running and ready and runs with another start time (likewise): "restarted", `at`
///     the new one;
///   - it was not paused and is now (not touched): "paused";
///   - its name, image, memory, CPU or pids limit differ (the agent never changes them):
///     "changed", naming them.
/// A container that the engine could not inspect (state unknown) tells nothing. Results are in
/// (instance, node) order. Thread-safe (pure).
std::vector<DriftReport> DetectDrift(const KnownContainers& before,
                                     const std::vector<ContainerInfo>& now,
                                     const std::set<std::string>& touched,
                                     const std::set<std::string>& started_lately,
                                     const std::vector<DesiredContainer>& desired);

/// `now` as the next round's `before`: each container by (instance, node) (of several, the one
/// running, else the first by id), with `ready` from `ready_ids`. Thread-safe (pure).
KnownContainers KnownFrom(const std::vector<ContainerInfo>& now,
                          const std::set<std::string>& ready_ids);

}  // namespace gpuwerk::agent
