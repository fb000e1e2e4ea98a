#pragma once

// The `placements` table (migration 2): which host holds which node of which instance
// (UNIQUE(host_id): a host is never given twice, C15). Not for use outside src/sched/.

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/states.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// One node of an instance placed on a host, with the instance's desired state.
struct PlacedNode {
  std::string instance_id;
  int64_t node_index = 0;
  DesiredState desired = DesiredState::kRunning;
};

/// One node of an instance with its host and, when reported, its observed container.
struct NodeRow {
  int64_t node_index = 0;
  std::string host_name;
  std::optional<int64_t> host_last_seen_at;
  std::string host_engine_error;
  bool host_gpu_required = true;
  std::string host_inventory;  ///< the agent's inventory JSON text
  /// The host's registered sshd address and port range (Host::ssh_address, ssh_port_low/high).
  std::string host_ssh_address;
  int64_t host_ssh_port_low = 0;
  int64_t host_ssh_port_high = 0;
  bool observed = false;  ///< a container was reported for this node
  std::string state;
  bool ssh_ready = false;
  int64_t restart_generation = 0;
  std::string error;
  int64_t ssh_port = 0;
  /// The SHA256 fingerprint of its sshd's host key as pinned (PlacementTable::PinHostKey); ""
  /// while none is.
  std::string host_key_fingerprint;
  std::string host_key_container_id;  ///< the container it was read from
  std::string container_id;           ///< the observed container; "" when none
};

/// A placed node's pinned sshd host key: its fingerprint and the container it was read from; both
/// "" while none is pinned.
struct HostKeyPin {
  std::string fingerprint;
  std::string container_id;
};

/// What a host's agent must run for one placed node of a live instance with desired `running`.
struct DesiredNode {
  std::string instance_id;
  int64_t node_index = 0;
  std::string hostname;
  std::string image;
  std::string public_key;
  int64_t restart_generation = 0;
  std::string name;
};

/// The `placements` table's SQL. Functions work inside the caller's transaction; errors are the
/// store's (a host taken meanwhile: the store's constraint violation). Stateless.
class PlacementTable {
 public:
  PlacementTable() = delete;

  static core::Result<void> Insert(store::Transaction& tx, const std::string& instance_id,
                                   const std::string& host_id, int64_t node_index);
  /// The host key pinned for node `node_index` of `instance_id` (empty when none, or not placed).
  static core::Result<HostKeyPin> HostKeyPinOf(store::Transaction& tx,
                                               const std::string& instance_id, int64_t node_index);
  /// Pins `pin` for node `node_index` of `instance_id` (in place of what was pinned).
  static core::Result<void> PinHostKey(store::Transaction& tx, const std::string& instance_id,
                                       int64_t node_index, const HostKeyPin& pin);
  /// Frees every host of the instance.
  static core::Result<void> DeleteOf(store::Transaction& tx, const std::string& instance_id);
  /// Frees the host of one node.
  static core::Result<void> DeleteNode(store::Transaction& tx, const std::string& instance_id,
                                       int64_t node_index);
  /// How many hosts the instance holds.
  static core::Result<int64_t> CountOf(store::Transaction& tx, const std::string& instance_id);
  /// How many nodes host `host_id` holds.
  static core::Result<int64_t> CountOnHost(store::Transaction& tx, const std::string& host_id);
  /// The nodes placed on host `host_id` with their instance's desired state.
  static core::Result<std::vector<PlacedNode>> ListOnHost(store::Transaction& tx,
                                                          const std::string& host_id);
  /// The names of the hosts the instance holds.
  static core::Result<std::vector<std::string>> HostNamesOf(store::Transaction& tx,
                                                            const std::string& instance_id);
  /// The instance's nodes by node index, each with its host and observed container.
  static core::Result<std::vector<NodeRow>> NodesOf(store::Transaction& tx,
                                                    const std::string& instance_id);
  /// An instance placed on any of `host_ids`; nullopt when they are all free.
  static core::Result<std::optional<std::string>> InstanceOnAny(
      store::Transaction& tx, const std::vector<std::string>& host_ids);
  /// The rail address of each node of the instance by node index ("" for a host in no pair).
  static core::Result<std::vector<std::string>> RailsOf(store::Transaction& tx,
                                                        const std::string& instance_id);
  /// What host `host_id` must run: its nodes of live instances with desired `running`, by
  /// instance id and node index.
  static core::Result<std::vector<DesiredNode>> DesiredOnHost(store::Transaction& tx,
                                                              const std::string& host_id);
  /// The instances with a node on a host not heard from since `since` (Unix seconds), or never.
  static core::Result<std::vector<std::string>> InstancesOnSilentHosts(store::Transaction& tx,
                                                                       int64_t since);
};

}  // namespace gpuwerk::sched::internal
