#include "sched/internal/placement_table.h"

namespace gpuwerk::sched::internal {

core::Result<void> PlacementTable::Insert(store::Transaction& tx, const std::string& instance_id,
                                          const std::string& host_id, int64_t node_index) {
  GPUWERK_TRY(tx.Exec("INSERT INTO placements (instance_id, host_id, node_index) VALUES (?, ?, ?)",
                      {instance_id, host_id, node_index}));
  return {};
}

core::Result<HostKeyPin> PlacementTable::HostKeyPinOf(store::Transaction& tx,
                                                      const std::string& instance_id,
                                                      int64_t node_index) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT host_key_fingerprint, host_key_container_id FROM placements "
                            "WHERE instance_id = ? AND node_index = ?",
                            {instance_id, node_index}));
  if (!row) return HostKeyPin{};
  return HostKeyPin{.fingerprint = row->Text("host_key_fingerprint"),
                    .container_id = row->Text("host_key_container_id")};
}

core::Result<void> PlacementTable::PinHostKey(store::Transaction& tx,
                                              const std::string& instance_id, int64_t node_index,
                                              const HostKeyPin& pin) {
  GPUWERK_TRY(
      tx.Exec("UPDATE placements SET host_key_fingerprint = ?, host_key_container_id = ? WHERE "
              "instance_id = ? AND node_index = ?",
              {pin.fingerprint, pin.container_id, instance_id, node_index}));
  return {};
}

core::Result<void> PlacementTable::DeleteOf(store::Transaction& tx,
                                            const std::string& instance_id) {
  GPUWERK_TRY(tx.Exec("DELETE FROM placements WHERE instance_id = ?", {instance_id}));
  return {};
}

core::Result<void> PlacementTable::DeleteNode(store::Transaction& tx,
                                              const std::string& instance_id, int64_t node_index) {
  GPUWERK_TRY(tx.Exec("DELETE FROM placements WHERE instance_id = ? AND node_index = ?",
                      {instance_id, node_index}));
  return {};
}

core::Result<int64_t> PlacementTable::CountOf(store::Transaction& tx,
                                              const std::string& instance_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT COUNT(*) AS n FROM placements WHERE instance_id = ?", {instance_id}));
  return row->Int("n");
}

core::Result<int64_t> PlacementTable::CountOnHost(store::Transaction& tx,
                                                  const std::string& host_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM placements WHERE host_id = ?", {host_id}));
  return row->Int("n");
}

core::Result<std::vector<PlacedNode>> PlacementTable::ListOnHost(store::Transaction& tx,
                                                                 const std::string& host_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query("SELECT p.instance_id, p.node_index, i.desired FROM placements p "
                          "JOIN instances i ON i.id = p.instance_id WHERE p.host_id = ?",
                          {host_id}));
  std::vector<PlacedNode> out;
  for (const auto& r : rows) {
    out.push_back(
        {.instance_id = r.Text("instance_id"),
         .node_index = r.Int("node_index"),
         .desired = DesiredStateFrom(r.Text("desired")).value_or(DesiredState::kRunning)});
  }
  return out;
}

core::Result<std::vector<std::string>> PlacementTable::HostNamesOf(store::Transaction& tx,
                                                                   const std::string& instance_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query("SELECT h.name FROM placements p JOIN hosts h ON h.id = p.host_id WHERE "
                          "p.instance_id = ?",
                          {instance_id}));
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.Text("name"));
  return out;
}

core::Result<std::vector<NodeRow>> PlacementTable::NodesOf(store::Transaction& tx,
                                                           const std::string& instance_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query("SELECT p.node_index, p.host_key_fingerprint, p.host_key_container_id, "
               "h.name AS host_name, h.last_seen_at, h.engine_error, "
               "h.gpu_required, h.inventory, h.ssh_address, h.ssh_port_low, h.ssh_port_high, "
               "o.state, o.ssh_ready, o.restart_generation, o.error, "
               "o.ssh_port, o.container_id FROM placements p JOIN hosts h ON h.id = p.host_id "
               "LEFT JOIN observed_containers o ON o.instance_id = p.instance_id AND "
               "o.node_index = p.node_index WHERE p.instance_id = ? ORDER BY p.node_index",
               {instance_id}));
  std::vector<NodeRow> out;
  for (const auto& r : rows) {
    out.push_back(NodeRow{.node_index = r.Int("node_index"),
                          .host_name = r.Text("host_name"),
                          .host_last_seen_at = r.OptInt("last_seen_at"),
                          .host_engine_error = r.Text("engine_error"),
                          .host_gpu_required = r.Int("gpu_required") != 0,
                          .host_inventory = r.Text("inventory"),
                          .host_ssh_address = r.Text("ssh_address"),
                          .host_ssh_port_low = r.Int("ssh_port_low"),
                          .host_ssh_port_high = r.Int("ssh_port_high"),
                          .observed = !r.IsNull("container_id"),
                          .state = r.Text("state"),
                          .ssh_ready = r.Int("ssh_ready") != 0,
                          .restart_generation = r.Int("restart_generation"),
                          .error = r.Text("error"),
                          .ssh_port = r.Int("ssh_port"),
                          .host_key_fingerprint = r.Text("host_key_fingerprint"),
                          .host_key_container_id = r.Text("host_key_container_id"),
                          .container_id = r.Text("container_id")});
  }
  return out;
}

core::Result<std::optional<std::string>> PlacementTable::InstanceOnAny(
    store::Transaction& tx, const std::vector<std::string>& host_ids) {
  for (const auto& host_id : host_ids) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto row,
        tx.QueryOne("SELECT instance_id FROM placements WHERE host_id = ? LIMIT 1", {host_id}));
    if (row) return std::optional<std::string>(row->Text("instance_id"));
  }
  return std::optional<std::string>();
}

core::Result<std::vector<std::string>> PlacementTable::RailsOf(store::Transaction& tx,
                                                               const std::string& instance_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query("SELECT p.node_index, m.rail_address FROM placements p LEFT JOIN "
               "host_pair_members m ON m.host_id = p.host_id WHERE p.instance_id = ? ORDER BY "
               "p.node_index",
               {instance_id}));
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.Text("rail_address"));
  return out;
}

core::Result<std::vector<DesiredNode>> PlacementTable::DesiredOnHost(store::Transaction& tx,
                                                                     const std::string& host_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query("SELECT i.id, p.node_index, i.hostname, i.image, i.public_key, "
                          "i.restart_generation, i.name FROM placements p JOIN instances i ON "
                          "i.id = p.instance_id WHERE p.host_id = ? AND i.desired = ? AND "
                          "i.deleted_at IS NULL ORDER BY i.id, p.node_index",
                          {host_id, std::string(ToString(DesiredState::kRunning))}));
  std::vector<DesiredNode> out;
  for (const auto& r : rows) {
    out.push_back(DesiredNode{.instance_id = r.Text("id"),
                              .node_index = r.Int("node_index"),
                              .hostname = r.Text("hostname"),
                              .image = r.Text("image"),
                              .public_key = r.Text("public_key"),
                              .restart_generation = r.Int("restart_generation"),
                              .name = r.Text("name")});
  }
  return out;
}

core::Result<std::vector<std::string>> PlacementTable::InstancesOnSilentHosts(
    store::Transaction& tx, int64_t since) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query("SELECT DISTINCT p.instance_id FROM placements p JOIN hosts h ON "
                          "h.id = p.host_id WHERE h.last_seen_at IS NULL OR h.last_seen_at < ?",
                          {since}));
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.Text("instance_id"));
  return out;
}

}  // namespace gpuwerk::sched::internal
