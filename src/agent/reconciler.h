#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/container_engine.h"
#include "core/error.h"
#include "protocol/agent_sync.h"

namespace gpuwerk::agent {

/// The labels the agent puts on every container it creates (docs/agent-protocol.md): the
/// instance id, the node index (decimal) and the restart generation applied at create (decimal).
/// The agent owns exactly the containers that carry kInstanceLabel and its own kHostLabel (and its
/// extra labels).
inline constexpr std::string_view kInstanceLabel = "gpuwerk.instance";
inline constexpr std::string_view kNodeLabel = "gpuwerk.node";
inline constexpr std::string_view kGenerationLabel = "gpuwerk.generation";
/// The id of the host (as the server knows it) whose agent made the container. An agent manages
/// only containers with its own host id: two agents on one engine (a test machine, two data
/// directories of `gpuwerk up`) never remove each other's containers.
inline constexpr std::string_view kHostLabel = "gpuwerk.host";

/// One entry of the sync answer's `desired` list (docs/agent-protocol.md, "One round").
using DesiredContainer = protocol::DesiredContainer;

/// What the agent does to one container.
enum class ActionKind {
  kCreate,   ///< create from `desired`, put its keys in, start it; record generation in the label
  kStart,    ///< start the stopped container `container_id`; record `generation` when above
  kRestart,  ///< restart the running container `container_id`; record `generation`
  kRemove,   ///< force-remove `container_id` (nobody wants it, a duplicate, or dead)
};

/// "create", "start", "restart", "remove", for logs.
std::string_view ActionKindName(ActionKind kind);

/// One step of a round. `desired` is set for kCreate, kStart and kRestart; `container_id` for
/// all but kCreate; `generation` is the restart generation to record once the step succeeded.
struct Action {
  ActionKind kind = ActionKind::kCreate;
  std::string container_id;
  DesiredContainer desired;
  int64_t generation = 0;
};

/// The restart generations the agent applied by restart, by container id (the ones applied at
/// create live in the container's kGenerationLabel).
using AppliedGenerations = std::map<std::string, int64_t>;

/// The generation last applied to `container`: the larger of its kGenerationLabel (0 when
/// missing or not a number) and `applied`'s entry for its id. Thread-safe (pure).
int64_t AppliedGeneration(const ContainerInfo& container, const AppliedGenerations& applied);

/// The (instance id, node index) a container belongs to, from its labels; node -1 when the
/// node label is missing or not a number.
struct ContainerKey {
  std::string instance_id;
  int node_index = 0;
  auto operator<=>(const ContainerKey&) const = default;
};
ContainerKey KeyOf(const ContainerInfo& container);

/// The reconciler: compares the whole desired list with every container the agent owns
/// (`observed`, as ListContainers/InspectContainer report them) and returns the steps that make
/// the host match. Level-triggered and idempotent: the same inputs give the same steps, and once
/// the steps have been applied, the next round gives none. Per desired (instance, node):
///   - no container: kCreate;
///   - created, exited: kStart (with the desired generation: a start after a stop is as good as
///     a restart; a host reboot or `docker stop` by hand, case C12);
///   - running: kRestart when the desired generation is above the applied one, else nothing
///     (an adopted running container is never restarted);
///   - dead: kRemove (the next round creates it again);
///   - restarting, paused, removing, unknown: nothing (the engine is acting, or the state is not
///     known; the report says so, case C11).
/// Several containers for one (instance, node): the one named `container_name` (else a running
/// one, else the first by id) is kept, the others are removed. Every container whose (instance,
/// node) no desired entry names is removed. Removals come first, then per desired entry in list
/// order. Thread-safe (pure).
std::vector<Action> Reconcile(const std::vector<DesiredContainer>& desired,
                              const std::vector<ContainerInfo>& observed,
                              const AppliedGenerations& applied);

/// One entry of the sync request's `containers` list (docs/agent-protocol.md).
using ContainerReport = protocol::ContainerReport;

/// The report for `container` (as last inspected). `engine_ok` false (the engine timed out or is
/// gone, case C11): state "unknown" and ssh_ready false, whatever the last answer said, and
/// `engine_error` as error: never a stale "running". `ssh_ready` counts only while running.
/// Thread-safe (pure).
ContainerReport ReportContainer(const ContainerInfo& container, int64_t applied_generation,
                                bool ssh_ready, bool engine_ok, std::string_view engine_error);

}  // namespace gpuwerk::agent
