#include "sched/internal/instance_rows.h"

#include <nlohmann/json.hpp>

#include "store/audit_log.h"

namespace gpuwerk::sched::internal {
namespace {

/// Per-node status; the instance takes the first in this order that any node has.
constexpr const char* kOrder[] = {"exited", "restarting", "provisioning", "running"};

std::string NodeStatus(const NodeView& n, int64_t restart_generation) {
  const bool restart_pending = n.observed && n.restart_generation < restart_generation;
  if (!n.observed) return "provisioning";
  if (n.state == "restarting") return "restarting";
  if (n.state == "exited" || n.state == "dead") return restart_pending ? "restarting" : "exited";
  if (n.state == "running" && n.ssh_ready && !restart_pending) return "running";
  return restart_pending ? "restarting" : "provisioning";
}

}  // namespace

std::pair<std::string, std::string> DeriveStatus(const std::string& desired,
                                                 const std::string& stored_status,
                                                 const std::string& stored_reason,
                                                 int64_t restart_generation,
                                                 const std::vector<NodeView>& nodes, int64_t now,
                                                 int64_t unknown_after) {
  if (stored_status == "deleted") return {"deleted", ""};
  if (desired == "deleted") return {"deleting", ""};
  if (stored_status == "failed") return {"failed", stored_reason};
  for (const auto& n : nodes) {
    if (!n.host_last_seen_at || *n.host_last_seen_at < now - unknown_after) {
      return {"unknown", "host " + n.host_name + " has not been heard from for more than " +
                             std::to_string(unknown_after) + " seconds"};
    }
  }
  for (const auto& n : nodes) {
    if (!n.host_engine_error.empty()) {
      return {"unknown", "the container engine on host " + n.host_name +
                             " is unavailable: " + n.host_engine_error};
    }
  }
  if (nodes.empty()) return {"provisioning", ""};
  std::string worst = "running";
  std::string reason;
  for (const char* candidate : kOrder) {
    for (const auto& n : nodes) {
      if (NodeStatus(n, restart_generation) == candidate) {
        worst = candidate;
        reason = n.error;
        break;
      }
    }
    if (worst == candidate) break;
  }
  return {worst, reason};
}

core::Result<std::optional<Instance>> LoadInstance(store::Transaction& tx, const std::string& id,
                                                   int64_t now, int64_t unknown_after) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne(
          "SELECT i.id, i.name, i.status, i.status_reason, i.hostname, i.gpu_type, i.desired, "
          "i.restart_generation, i.ssh_key_id, k.name, k.fingerprint, i.billing_session_id, "
          "b.started_at, i.created_at, i.deleted_at FROM instances i "
          "LEFT JOIN ssh_keys k ON k.id = i.ssh_key_id "
          "LEFT JOIN billing_sessions b ON b.id = i.billing_session_id WHERE i.id = ?",
          {id}));
  if (!row) return std::optional<Instance>();
  const store::Row& r = *row;
  Instance in{.id = r.Text(0),
              .name = r.Text(1),
              .status = r.Text(2),
              .status_reason = r.Text(3),
              .hostname = r.Text(4),
              .gpu_type = r.Text(5),
              .desired = r.Text(6),
              .restart_generation = r.Int(7),
              .ssh_key_id = r.Text(8),
              .ssh_key_name = r.Text(9),
              .ssh_key_fingerprint = r.Text(10),
              .billing_session_id = r.Text(11),
              .billing_started_at = r.Int(12),
              .created_at = r.Int(13),
              .deleted_at = r.OptInt(14)};
  GPUWERK_ASSIGN_OR_RETURN(
      auto nodes_rows,
      tx.Query("SELECT p.node_index, h.name, h.last_seen_at, h.engine_error, h.gpu_required, "
               "h.inventory, o.state, o.ssh_ready, o.restart_generation, o.error, o.ssh_port, "
               "o.container_id FROM placements p JOIN hosts h ON h.id = p.host_id "
               "LEFT JOIN observed_containers o ON o.instance_id = p.instance_id AND "
               "o.node_index = p.node_index WHERE p.instance_id = ? ORDER BY p.node_index",
               {id}));
  std::vector<NodeView> nodes;
  for (const auto& n : nodes_rows) {
    NodeView v{.node_index = n.Int(0),
               .host_name = n.Text(1),
               .host_last_seen_at = n.OptInt(2),
               .host_engine_error = n.Text(3),
               .observed = !n.IsNull(11),
               .state = n.Text(6),
               .ssh_ready = n.Int(7) != 0,
               .restart_generation = n.Int(8),
               .error = n.Text(9)};
    in.hosts.push_back(v.host_name);
    if (n.Int(4) == 0) in.gpu_attached = false;
    if (v.node_index == 0) {
      in.ssh_address = "127.0.0.1";
      auto inventory = nlohmann::json::parse(n.Text(5), nullptr, false);
      // The address the agent publishes sshd ports on; older agents: their first address.
      if (inventory.is_object() && inventory.contains("ssh_address") &&
          inventory["ssh_address"].is_string() &&
          !inventory["ssh_address"].get<std::string>().empty()) {
        in.ssh_address = inventory["ssh_address"].get<std::string>();
      } else if (inventory.is_object() && inventory.contains("addresses") &&
                 inventory["addresses"].is_array() && !inventory["addresses"].empty() &&
                 inventory["addresses"][0].is_string()) {
        in.ssh_address = inventory["addresses"][0].get<std::string>();
      }
      in.ssh_port = v.observed ? n.Int(10) : 0;
    }
    nodes.push_back(std::move(v));
  }
  if (!in.deleted_at) {
    std::tie(in.status, in.status_reason) = DeriveStatus(
        in.desired, in.status, in.status_reason, in.restart_generation, nodes, now, unknown_after);
  }
  return std::optional<Instance>(std::move(in));
}

core::Result<bool> FinalizeIfGone(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                  const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT i.person_id, i.name, (SELECT COUNT(*) FROM placements p "
                            "WHERE p.instance_id = i.id) FROM instances i WHERE i.id = ? AND "
                            "i.desired = 'deleted' AND i.deleted_at IS NULL",
                            {id}));
  if (!row || row->Int(2) != 0) return false;
  GPUWERK_TRY(
      tx.Exec("UPDATE instances SET deleted_at = ?, status = 'deleted', status_reason = "
              "'' WHERE id = ?",
              {clock.NowUnix(), id}));
  GPUWERK_TRY(tx.Exec("DELETE FROM observed_containers WHERE instance_id = ?", {id}));
  GPUWERK_TRY(store::RecordAudit(tx, clock, rng,
                                 {.actor_id = "",
                                  .action = "instance.deleted",
                                  .target = id,
                                  .source_address = "system",
                                  .detail = {{"name", row->Text(1)}, {"owner", row->Text(0)}}}));
  return true;
}

}  // namespace gpuwerk::sched::internal
