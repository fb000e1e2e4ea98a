#pragma once

// Helpers shared by InstanceService and AgentSync; not for use outside src/sched/.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "sched/instance_service.h"
#include "sched/internal/placement_table.h"
#include "sched/states.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// The status and reason of a live instance from its desired state and its nodes, as
/// docs/agent-protocol.md "Status (server side)" says. `stored_status` "failed" and `desired`
/// "deleted" win over observations; a host silent for `unknown_after` seconds before `now`
/// gives `unknown`. `nodes`: the instance's nodes with their hosts and observed containers
/// (PlacementTable::NodesOf). `drift_reason` (a change made outside gpuwerk, while the status
/// still shows it; "" otherwise) is the reason of a live, not failed instance whose nodes say no
/// other. Pure.
std::pair<InstanceStatus, std::string> DeriveStatus(
    DesiredState desired, InstanceStatus stored_status, const std::string& stored_reason,
    int64_t restart_generation, const std::vector<NodeRow>& nodes, int64_t now,
    int64_t unknown_after, const std::string& drift_reason = "");

/// Loads instance `id` (any person, live or not) with its derived status. nullopt when absent.
core::Result<std::optional<Instance>> LoadInstance(store::Transaction& tx, const std::string& id,
                                                   int64_t now, int64_t unknown_after);

/// When instance `id` has desired `deleted` and holds no more hosts: sets deleted_at, status
/// `deleted`, drops its observations and audits it. True when it did.
core::Result<bool> FinalizeIfGone(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                  const std::string& id);

}  // namespace gpuwerk::sched::internal
