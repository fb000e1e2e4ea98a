#include "sched/internal/cluster_key_table.h"

namespace gpuwerk::sched::internal {

core::Result<std::optional<ClusterKeys>> ClusterKeyTable::Find(store::Transaction& tx,
                                                               const std::string& instance_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT worker_private_key, worker_public_key, node1_host_private_key, "
                  "node1_host_public_key FROM instance_cluster_keys WHERE instance_id = ?",
                  {instance_id}));
  if (!row) return std::optional<ClusterKeys>();
  return std::optional<ClusterKeys>(
      ClusterKeys{.worker_private_key = row->Text("worker_private_key"),
                  .worker_public_key = row->Text("worker_public_key"),
                  .node1_host_private_key = row->Text("node1_host_private_key"),
                  .node1_host_public_key = row->Text("node1_host_public_key")});
}

core::Result<void> ClusterKeyTable::InsertIfAbsent(store::Transaction& tx,
                                                   const std::string& instance_id,
                                                   const ClusterKeys& keys, int64_t now) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO instance_cluster_keys (instance_id, worker_private_key, worker_public_key, "
      "node1_host_private_key, node1_host_public_key, created_at) VALUES (?, ?, ?, ?, ?, ?) "
      "ON CONFLICT (instance_id) DO NOTHING",
      {instance_id, keys.worker_private_key, keys.worker_public_key, keys.node1_host_private_key,
       keys.node1_host_public_key, now}));
  return {};
}

core::Result<void> ClusterKeyTable::Delete(store::Transaction& tx, const std::string& instance_id) {
  GPUWERK_TRY(tx.Exec("DELETE FROM instance_cluster_keys WHERE instance_id = ?", {instance_id}));
  return {};
}

}  // namespace gpuwerk::sched::internal
