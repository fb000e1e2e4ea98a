#include "sched/internal/instance_rows.h"

#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "billing/billing_session_table.h"
#include "keys/ssh_key_table.h"
#include "sched/instance_table.h"
#include "sched/internal/cluster_key_table.h"
#include "sched/internal/observed_container_table.h"
#include "sched/internal/placement_table.h"
#include "sched/internal/queue_entry_table.h"

namespace gpuwerk::sched::internal {
namespace {

/// Per-node status; the instance takes the first in this order that any node has.
constexpr InstanceStatus kOrder[] = {InstanceStatus::kExited, InstanceStatus::kRestarting,
                                     InstanceStatus::kProvisioning, InstanceStatus::kRunning};

/// A node's status from its engine state (Docker's: created, running, restarting, exited, dead).
InstanceStatus NodeStatus(const NodeRow& n, int64_t restart_generation) {
  const bool restart_pending = n.observed && n.restart_generation < restart_generation;
  if (!n.observed) return InstanceStatus::kProvisioning;
  if (n.state == "restarting") return InstanceStatus::kRestarting;
  if (n.state == "exited" || n.state == "dead") {
    return restart_pending ? InstanceStatus::kRestarting : InstanceStatus::kExited;
  }
  if (n.state == "running" && n.ssh_ready && !restart_pending) return InstanceStatus::kRunning;
  return restart_pending ? InstanceStatus::kRestarting : InstanceStatus::kProvisioning;
}

}  // namespace

std::pair<InstanceStatus, std::string> DeriveStatus(
    DesiredState desired, InstanceStatus stored_status, const std::string& stored_reason,
    int64_t restart_generation, const std::vector<NodeRow>& nodes, int64_t now,
    int64_t unknown_after, const std::string& drift_reason) {
  if (stored_status == InstanceStatus::kDeleted) return {InstanceStatus::kDeleted, ""};
  if (desired == DesiredState::kDeleted) return {InstanceStatus::kDeleting, ""};
  if (stored_status == InstanceStatus::kFailed) return {InstanceStatus::kFailed, stored_reason};
  // A 2-host instance's reason names the node it is about: "node 1 (host b): …".
  const auto which = [&](const NodeRow& n) {
    return nodes.size() > 1
               ? "node " + std::to_string(n.node_index) + " (host " + n.host_name + "): "
               : std::string();
  };
  for (const auto& n : nodes) {
    if (!n.host_last_seen_at || *n.host_last_seen_at < now - unknown_after) {
      return {InstanceStatus::kUnknown, which(n) + "host " + n.host_name +
                                            " has not been heard from for more than " +
                                            std::to_string(unknown_after) + " seconds"};
    }
  }
  for (const auto& n : nodes) {
    if (!n.host_engine_error.empty()) {
      return {InstanceStatus::kUnknown, which(n) + "the container engine on host " + n.host_name +
                                            " is unavailable: " + n.host_engine_error};
    }
  }
  if (nodes.empty()) return {InstanceStatus::kProvisioning, drift_reason};
  InstanceStatus worst = InstanceStatus::kRunning;
  std::string reason;
  for (InstanceStatus candidate : kOrder) {
    for (const auto& n : nodes) {
      if (NodeStatus(n, restart_generation) == candidate) {
        worst = candidate;
        reason = n.error;
        if (!reason.empty()) {
          reason = which(n) + reason;
        } else if (nodes.size() > 1 && candidate == InstanceStatus::kExited) {
          // The drift reason says more when there is one ("the container of node 1 stopped …").
          reason = drift_reason.empty() ? which(n) + "its container is not running" : drift_reason;
        }
        break;
      }
    }
    if (worst == candidate) break;
  }
  if (reason.empty()) reason = drift_reason;
  return {worst, reason};
}

core::Result<std::optional<Instance>> LoadInstance(store::Transaction& tx, const std::string& id,
                                                   int64_t now, int64_t unknown_after) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, InstanceTable::Find(tx, id));
  if (!row) return std::optional<Instance>();
  const InstanceRow& r = *row;
  Instance in{.id = r.id,
              .name = r.name,
              .status = r.status,
              .status_reason = r.status_reason,
              .hostname = r.hostname,
              .gpu_type = r.gpu_type,
              .desired = r.desired,
              .restart_generation = r.restart_generation,
              .ssh_key_id = r.ssh_key_id,
              .billing_session_id = r.billing_session_id,
              .created_at = r.created_at,
              .deleted_at = r.deleted_at};
  if (!r.drift_kind.empty()) {
    in.drift = Instance::Drift{.kind = r.drift_kind,
                               .reason = r.drift_reason,
                               .at = r.drift_at.value_or(0),
                               .count = r.drift_count};
  }
  GPUWERK_ASSIGN_OR_RETURN(auto key, keys::SshKeyTable::Find(tx, r.ssh_key_id));
  if (key) {
    in.ssh_key_name = key->name;
    in.ssh_key_fingerprint = key->fingerprint;
  }
  GPUWERK_ASSIGN_OR_RETURN(auto started,
                           billing::BillingSessionTable::StartedAt(tx, r.billing_session_id));
  in.billing_started_at = started.value_or(0);
  GPUWERK_ASSIGN_OR_RETURN(auto node_rows, PlacementTable::NodesOf(tx, id));
  for (const auto& n : node_rows) {
    in.hosts.push_back(n.host_name);
    if (!n.host_gpu_required) in.gpu_attached = false;
    if (n.node_index == 0) {
      // Where sshd is reached: the address the operator registered for the host, never the one
      // its agent reports, and the reported port only inside the registered range (issue 12
      // finding 1; docs/ssh.md "Upstream address").
      in.ssh_address = n.host_ssh_address;
      const bool in_range =
          n.ssh_port >= n.host_ssh_port_low && n.ssh_port <= n.host_ssh_port_high && n.ssh_port > 0;
      in.ssh_port = n.observed && in_range ? n.ssh_port : 0;
      in.ssh_host_key_fingerprint = n.host_key_fingerprint;
      // A container made again whose host key is not reported yet: nothing to check its sshd
      // against, so it is not reachable until then (docs/ssh.md "Host key pinning").
      if (!n.host_key_fingerprint.empty() && n.container_id != n.host_key_container_id) {
        in.ssh_port = 0;
      }
    }
  }
  if (node_rows.size() > 1 && !in.deleted_at) {
    for (const auto& n : node_rows) {
      InstanceStatus status = NodeStatus(n, in.restart_generation);
      if (!n.host_last_seen_at || *n.host_last_seen_at < now - unknown_after ||
          !n.host_engine_error.empty()) {
        status = InstanceStatus::kUnknown;
      }
      if (in.desired == DesiredState::kDeleted) status = InstanceStatus::kDeleting;
      in.nodes.push_back({.index = n.node_index, .host = n.host_name, .status = status});
    }
  }
  if (!in.deleted_at) {
    std::tie(in.status, in.status_reason) =
        DeriveStatus(in.desired, in.status, in.status_reason, in.restart_generation, node_rows, now,
                     unknown_after, r.drift_in_status ? r.drift_reason : std::string());
  }
  return std::optional<Instance>(std::move(in));
}

core::Result<bool> FinalizeIfGone(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                  const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, InstanceTable::Find(tx, id));
  if (!row || row->desired != DesiredState::kDeleted || row->deleted_at) return false;
  GPUWERK_ASSIGN_OR_RETURN(int64_t holding, PlacementTable::CountOf(tx, id));
  if (holding != 0) return false;
  GPUWERK_TRY(InstanceTable::MarkFinallyDeleted(tx, id, clock.NowUnix()));
  GPUWERK_TRY(ObservedContainerTable::DeleteOf(tx, id));
  GPUWERK_TRY(ClusterKeyTable::Delete(tx, id));  // a 2-host instance's key pairs go with it
  GPUWERK_TRY(audit::RecordAudit(tx, clock, rng,
                                 {.actor_id = "",
                                  .action = "instance.deleted",
                                  .target = id,
                                  .source_address = "system",
                                  .detail = {{"name", row->name}, {"owner", row->person_id}}}));
  return true;
}

}  // namespace gpuwerk::sched::internal

namespace gpuwerk::sched {

using internal::QueueEntryTable;

core::Result<keys::KeyUse> KeyUsers(store::Transaction& tx, const std::string& person_id,
                                    const std::string& key_id) {
  keys::KeyUse use;
  GPUWERK_ASSIGN_OR_RETURN(auto instances, InstanceTable::ListLiveWithKey(tx, person_id, key_id));
  for (const auto& in : instances) use.instances.push_back(in.name);
  GPUWERK_ASSIGN_OR_RETURN(auto entries, QueueEntryTable::ListOpenWithKey(tx, person_id, key_id));
  for (const auto& e : entries) {
    use.queue_entries.push_back({.id = e.id, .name = e.name, .gpu_type = e.gpu_type});
  }
  return use;
}

}  // namespace gpuwerk::sched
