#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace gpuwerk::protocol {

// The server ⇄ agent protocol v1, as defined in docs/agent-protocol.md: the body of
// `POST /api/v1/agent/sync` (AgentSyncRequest), its answer (AgentSyncAnswer) and the answer of
// `GET /api/v1/agent/watch` (AgentWatchAnswer).
//
// Every FromJson below is strict: a member that is missing, null (unless the format makes it
// optional) or of another JSON type is refused with kInvalidArgument, api code "invalid_field",
// a message naming it by its path ("containers[1].ssh_port") and details {"field": path}. What
// the agent sends the server (AgentSyncRequest) also refuses members the format does not define,
// naming them (R-19; upgrade the server before its agents). The answers the agent reads ignore
// such members (a newer server may send more). All functions are pure and thread-safe.

/// One GPU as NVML reports it (`inventory.gpus[]`).
struct Gpu {
  std::string name;           ///< nvmlDeviceGetName, e.g. "NVIDIA GB10"
  std::string uuid;           ///< nvmlDeviceGetUUID, e.g. "GPU-8f6c…"
  uint64_t memory_bytes = 0;  ///< total memory, bytes

  bool operator==(const Gpu&) const = default;
};

/// What the agent gives every instance container (`inventory.limits`, docs/isolation.md). Optional
/// in the format (an older agent sends none: all zero and empty).
struct InstanceLimitsReport {
  int64_t memory_bytes = 0;               ///< bytes; 0: no limit
  int64_t nano_cpus = 0;                  ///< billionths of a CPU; 0: no limit
  int64_t pids_limit = 0;                 ///< 0: the engine's default
  std::vector<std::string> capabilities;  ///< kept, e.g. "CAP_CHOWN"; the rest are dropped
  /// Limits the engine does not enforce on this host, one sentence each (e.g. the disk).
  std::vector<std::string> not_enforced;
  /// How a Docker daemon may run inside the instances: "off", "sysbox" or "privileged" (root in
  /// an instance is root on the host; docs/docker-inside.md); "" when the agent does not say.
  /// Optional in the format.
  std::string docker_inside;
  /// Each instance container's /dev/shm size, bytes; 0 when the agent does not say. Optional.
  int64_t shm_bytes = 0;

  bool operator==(const InstanceLimitsReport&) const = default;
};

/// What a host has: the sync request's `inventory`.
struct Inventory {
  std::vector<Gpu> gpus;
  uint64_t memory_bytes = 0;                ///< physical memory, bytes
  int cpus = 0;                             ///< online CPUs
  std::vector<std::string> addresses;       ///< the host's IPv4 addresses, loopback skipped
  std::vector<std::string> rail_addresses;  ///< fabric (rail) addresses
  /// The address the agent publishes sshd ports on (`--ssh-bind`); the server shows it in the
  /// instance's `ssh_command`.
  std::string ssh_address;
  std::string nvml = "ok";      ///< "ok" or "unavailable: <reason>"
  InstanceLimitsReport limits;  ///< optional in the format

  bool operator==(const Inventory&) const = default;
};

/// The sync request's `engine`: whether the container engine answered this round.
struct EngineHealth {
  bool ok = false;
  std::string error;  ///< why not ("" when ok), e.g. "engine_unavailable: …"

  bool operator==(const EngineHealth&) const = default;
};

/// One entry of the sync request's `containers`: a container the agent owns, in any state.
struct ContainerReport {
  std::string instance_id;
  int node_index = 0;
  std::string container_id;
  std::string state;  ///< the engine's state name, or "unknown" when the engine could not be asked
  int exit_code = 0;
  std::string started_at;  ///< RFC 3339 as the engine sent it
  /// Its last finish time, RFC 3339 as the engine sent it (Docker's "0001-01-01T00:00:00Z" when it
  /// never finished); "" when unknown, and then not sent. Billing's evidence after a silence
  /// (docs/billing.md "Evidence"). At most 64 characters.
  std::string finished_at;
  uint16_t ssh_port = 0;   ///< the host port sshd is published on; 0 when none
  bool ssh_ready = false;  ///< sshd accepted the person's key (docs/agent-protocol.md, Readiness)
  int64_t restart_generation = 0;  ///< the generation last applied to this container
  std::string error;
  /// Its sshd's ed25519 host key, "ssh-ed25519 BASE64", read from the container's filesystem
  /// once its login was proven; "" until then (sent only when set; docs/agent-protocol.md "Host
  /// key"). At most 512 characters.
  std::string ssh_host_key;

  bool operator==(const ContainerReport&) const = default;
};

/// One entry of the sync request's `failures`: a create that failed for good.
struct CreateFailure {
  std::string instance_id;
  int node_index = 0;
  std::string code;  ///< the engine's api code, e.g. "image_not_found"
  std::string message;

  bool operator==(const CreateFailure&) const = default;
};

/// The kinds of DriftReport (docs/agent-protocol.md "Drift").
inline constexpr const char* kDriftKinds[] = {"stopped", "restarted", "paused", "removed",
                                              "changed"};
/// What a DriftReport of kind "changed" may name.
inline constexpr const char* kDriftChanges[] = {"name", "image", "memory", "cpus", "pids"};

/// One entry of the sync request's `drift`: a change to a container of a desired instance that
/// the agent did not make (docs/agent-protocol.md "Drift"). Reported once, in the round that
/// saw it.
struct DriftReport {
  std::string instance_id;
  int node_index = 0;
  /// One of kDriftKinds: "stopped" (it ran and served logins, now it is stopped, and the agent
  /// did not stop it), "restarted" (it runs, started again by someone else), "paused", "removed"
  /// (gone from the engine), "changed" (its name, image or limits differ from the last round).
  std::string kind;
  std::string container_id;  ///< the container it happened to
  int exit_code = 0;         ///< "stopped": the main process's exit code; else 0
  bool oom_killed = false;   ///< "stopped": the kernel's OOM killer ended it
  /// "stopped": when it ended; "restarted": when it started again; RFC 3339 as the engine sent
  /// it. "" for the other kinds.
  std::string at;
  /// "removed": the agent created the container again in the same round, as `new_container_id`
  /// (from the image: the files are new and so are sshd's host keys).
  bool recreated = false;
  std::string new_container_id;
  std::vector<std::string> changes;  ///< "changed": what changed, from kDriftChanges

  bool operator==(const DriftReport&) const = default;
};

/// The body of `POST /api/v1/agent/sync`.
struct AgentSyncRequest {
  std::string agent_version;  ///< e.g. "0.1.0"
  Inventory inventory;
  EngineHealth engine;
  std::vector<ContainerReport> containers;
  std::vector<CreateFailure> failures;
  /// Absent on the wire except in an agent's first round, which sends `"observed": false` (no
  /// containers yet: it does not know its host id). nullopt means observed.
  std::optional<bool> observed;
  /// Changes made to the host's containers outside gpuwerk. Optional on the wire (an older agent
  /// sends none); written only when not empty, so that an older server (which refuses members
  /// it does not know) keeps taking this agent's rounds until there is drift to report.
  std::vector<DriftReport> drift;

  bool operator==(const AgentSyncRequest&) const = default;
};

/// What one node of a 2-host instance is told about its cluster: the sync answer's
/// `desired[].cluster` (R-8, docs/clusters.md, docs/agent-protocol.md). Absent for a 1-host
/// instance. The agent turns it into files in the container (agent/cluster_files.h).
struct ClusterSpec {
  int node_index = 0;  ///< this node's index: 0 or 1
  /// Each node's rail (fabric) address by node index, IPv4 or IPv6 literals: exactly two.
  std::vector<std::string> rail_addresses;
  /// TCP port of torch.distributed's env:// rendezvous on node 0 (`MASTER_PORT`).
  int master_port = 29500;
  /// TCP port of torchrun's c10d rendezvous on node 0 (`--rdzv_endpoint=<node0>:<port>`).
  int rendezvous_port = 29400;
  /// The instance's worker key, "ssh-ed25519 BASE64 COMMENT": node 1's sshd accepts it from node
  /// 0's rail address. Sent to both nodes.
  std::string worker_public_key;
  /// Node 0 only ("" for node 1): the worker key's private half, OpenSSH format. A secret.
  std::string worker_private_key;
  /// Node 1's sshd host key, "ssh-ed25519 BASE64 COMMENT": node 0's known_hosts names it.
  std::string node1_host_public_key;
  /// Node 1 only ("" for node 0): its sshd's Ed25519 host key, OpenSSH format. A secret.
  std::string host_private_key;

  bool operator==(const ClusterSpec&) const = default;
};

/// One entry of the sync answer's `desired`: a container that belongs on the host.
struct DesiredContainer {
  std::string instance_id;  ///< non-empty
  int node_index = 0;
  std::string container_name;  ///< non-empty, e.g. "gpuwerk-ins_…-0"
  std::string hostname;
  std::string image;         ///< non-empty
  int64_t memory_bytes = 0;  ///< bytes; 0: no limit
  bool gpu = false;
  std::vector<std::string> authorized_keys;  ///< OpenSSH public key lines
  int64_t restart_generation = 0;
  std::vector<std::string> env;  ///< "NAME=value"
  /// A node of a 2-host instance: its cluster (optional in the format; nullopt for 1 host).
  std::optional<ClusterSpec> cluster;

  bool operator==(const DesiredContainer&) const = default;
};

/// The answer of `POST /api/v1/agent/sync`.
struct AgentSyncAnswer {
  std::string host_id;                ///< the host's id ("hst_…"), non-empty
  int64_t sync_interval_seconds = 2;  ///< the pause between periodic rounds, seconds
  std::vector<DesiredContainer> desired;
  /// Opaque; changes whenever an instance on the host is created, restarted or deleted. The
  /// server always sends it; nullopt only before the handler set it.
  std::optional<std::string> desired_version;

  bool operator==(const AgentSyncAnswer&) const = default;
};

/// The answer of `GET /api/v1/agent/watch`.
struct AgentWatchAnswer {
  std::string version;  ///< the host's desired-state version now

  bool operator==(const AgentWatchAnswer&) const = default;
};

nlohmann::json ToJson(const Gpu& gpu);
nlohmann::json ToJson(const Inventory& inventory);
nlohmann::json ToJson(const EngineHealth& engine);
nlohmann::json ToJson(const ContainerReport& report);
nlohmann::json ToJson(const CreateFailure& failure);
nlohmann::json ToJson(const DriftReport& drift);
/// `observed` is written only when set, `drift` only when not empty.
nlohmann::json ToJson(const AgentSyncRequest& request);
nlohmann::json ToJson(const ClusterSpec& cluster);
/// `cluster` is written only when set.
nlohmann::json ToJson(const DesiredContainer& desired);
/// `desired_version` is written only when set.
nlohmann::json ToJson(const AgentSyncAnswer& answer);
nlohmann::json ToJson(const AgentWatchAnswer& answer);

/// The FromJson functions take the JSON value and the path it has in the message (for field
/// names in errors; "" for a whole body). Errors: invalid_field (see above).
core::Result<Gpu> GpuFromJson(const nlohmann::json& json, const std::string& path = "");
core::Result<Inventory> InventoryFromJson(const nlohmann::json& json, const std::string& path = "");
core::Result<EngineHealth> EngineHealthFromJson(const nlohmann::json& json,
                                                const std::string& path = "");
core::Result<ContainerReport> ContainerReportFromJson(const nlohmann::json& json,
                                                      const std::string& path = "");
core::Result<CreateFailure> CreateFailureFromJson(const nlohmann::json& json,
                                                  const std::string& path = "");
/// Also refuses a `kind` not in kDriftKinds and a `changes` entry not in kDriftChanges.
core::Result<DriftReport> DriftReportFromJson(const nlohmann::json& json,
                                              const std::string& path = "");
core::Result<AgentSyncRequest> AgentSyncRequestFromJson(const nlohmann::json& json);
/// Also refuses a node_index other than 0 and 1, and rail_addresses that are not two.
core::Result<ClusterSpec> ClusterSpecFromJson(const nlohmann::json& json,
                                              const std::string& path = "");
/// Also refuses an empty instance_id, container_name or image.
core::Result<DesiredContainer> DesiredContainerFromJson(const nlohmann::json& json,
                                                        const std::string& path = "");
/// Also refuses an empty host_id.
core::Result<AgentSyncAnswer> AgentSyncAnswerFromJson(const nlohmann::json& json);
core::Result<AgentWatchAnswer> AgentWatchAnswerFromJson(const nlohmann::json& json);

}  // namespace gpuwerk::protocol
