#include "sched/internal/observed_container_table.h"

namespace gpuwerk::sched::internal {

core::Result<void> ObservedContainerTable::Replace(store::Transaction& tx, const ContainerReport& c,
                                                   const std::string& host_id,
                                                   int64_t observed_at) {
  GPUWERK_TRY(tx.Exec("DELETE FROM observed_containers WHERE instance_id = ? AND node_index = ?",
                      {c.instance_id, c.node_index}));
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO observed_containers (instance_id, node_index, host_id, container_id, state, "
      "exit_code, started_at, ssh_port, ssh_ready, restart_generation, error, observed_at) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {c.instance_id, c.node_index, host_id, c.container_id, c.state, c.exit_code, c.started_at,
       c.ssh_port, int64_t{c.ssh_ready ? 1 : 0}, c.restart_generation, c.error, observed_at}));
  return {};
}

core::Result<std::optional<std::string>> ObservedContainerTable::ErrorOf(
    store::Transaction& tx, const std::string& instance_id, int64_t node_index) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT error FROM observed_containers WHERE instance_id = ? AND "
                            "node_index = ?",
                            {instance_id, node_index}));
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(row->Text("error"));
}

core::Result<void> ObservedContainerTable::DeleteOf(store::Transaction& tx,
                                                    const std::string& instance_id) {
  GPUWERK_TRY(tx.Exec("DELETE FROM observed_containers WHERE instance_id = ?", {instance_id}));
  return {};
}

core::Result<void> ObservedContainerTable::DeleteNode(store::Transaction& tx,
                                                      const std::string& instance_id,
                                                      int64_t node_index,
                                                      const std::string& host_id) {
  GPUWERK_TRY(
      tx.Exec("DELETE FROM observed_containers WHERE instance_id = ? AND node_index = ? AND "
              "host_id = ?",
              {instance_id, node_index, host_id}));
  return {};
}

core::Result<void> ObservedContainerTable::DeleteOnHost(store::Transaction& tx,
                                                        const std::string& host_id) {
  GPUWERK_TRY(tx.Exec("DELETE FROM observed_containers WHERE host_id = ?", {host_id}));
  return {};
}

}  // namespace gpuwerk::sched::internal
