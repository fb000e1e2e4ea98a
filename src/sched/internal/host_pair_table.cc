#include "sched/internal/host_pair_table.h"

namespace gpuwerk::sched::internal {

core::Result<std::optional<HostPair>> HostPairTable::Load(store::Transaction& tx,
                                                          const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query("SELECT hp.id, hp.created_at, m.host_id, h.name AS host_name, m.node_index, "
               "m.rail_address, h.gpu_type, p.instance_id FROM host_pairs hp JOIN "
               "host_pair_members m ON m.pair_id = hp.id JOIN hosts h ON h.id = m.host_id LEFT "
               "JOIN placements p ON p.host_id = h.id WHERE hp.id = ? ORDER BY m.node_index",
               {id}));
  if (rows.empty()) return std::optional<HostPair>();
  HostPair pair{.id = rows[0].Text("id"),
                .gpu_type = rows[0].Text("gpu_type"),
                .created_at = rows[0].Int("created_at")};
  for (const auto& r : rows) {
    pair.members.push_back(HostPairMember{.host_id = r.Text("host_id"),
                                          .host_name = r.Text("host_name"),
                                          .node_index = r.Int("node_index"),
                                          .rail_address = r.Text("rail_address")});
    if (pair.instance_id.empty() && !r.IsNull("instance_id")) {
      pair.instance_id = r.Text("instance_id");
    }
  }
  return std::optional<HostPair>(std::move(pair));
}

core::Result<std::optional<std::string>> HostPairTable::PairOfHost(store::Transaction& tx,
                                                                   const std::string& host_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT pair_id FROM host_pair_members WHERE host_id = ?", {host_id}));
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(row->Text("pair_id"));
}

core::Result<std::vector<std::string>> HostPairTable::ListIds(store::Transaction& tx, int64_t limit,
                                                              int64_t offset) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query("SELECT id FROM host_pairs ORDER BY created_at, id LIMIT ? OFFSET ?",
                          {limit, offset}));
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.Text("id"));
  return out;
}

core::Result<int64_t> HostPairTable::Count(store::Transaction& tx) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM host_pairs"));
  return row->Int("n");
}

core::Result<void> HostPairTable::Insert(store::Transaction& tx, const std::string& id,
                                         int64_t created_at,
                                         const std::vector<std::string>& host_ids,
                                         const std::vector<std::string>& rail_addresses) {
  GPUWERK_TRY(tx.Exec("INSERT INTO host_pairs (id, created_at) VALUES (?, ?)", {id, created_at}));
  for (size_t node = 0; node < host_ids.size(); ++node) {
    GPUWERK_TRY(
        tx.Exec("INSERT INTO host_pair_members (host_id, pair_id, node_index, rail_address) VALUES "
                "(?, ?, ?, ?)",
                {host_ids[node], id, static_cast<int64_t>(node), rail_addresses.at(node)}));
  }
  return {};
}

core::Result<void> HostPairTable::Delete(store::Transaction& tx, const std::string& id) {
  GPUWERK_TRY(tx.Exec("DELETE FROM host_pair_members WHERE pair_id = ?", {id}));
  GPUWERK_TRY(tx.Exec("DELETE FROM host_pairs WHERE id = ?", {id}));
  return {};
}

}  // namespace gpuwerk::sched::internal
