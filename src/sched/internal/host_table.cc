#include "sched/internal/host_table.h"

#include <algorithm>

namespace gpuwerk::sched::internal {
namespace {

constexpr std::string_view kHostColumns =
    "h.id, h.name, h.gpu_type, h.gpu_required, h.drained, h.created_at, h.last_seen_at, "
    "h.inventory, h.engine_error, h.degraded_reason, h.ssh_address, h.ssh_port_low, "
    "h.ssh_port_high";

Host HostOf(const store::Row& r) {
  Host h{.id = r.Text("id"),
         .name = r.Text("name"),
         .gpu_type = r.Text("gpu_type"),
         .gpu_required = r.Int("gpu_required") != 0,
         .drained = r.Int("drained") != 0,
         .created_at = r.Int("created_at"),
         .last_seen_at = r.OptInt("last_seen_at"),
         .inventory = nlohmann::json::parse(r.Text("inventory"), nullptr, false),
         .engine_error = r.Text("engine_error"),
         .degraded_reason = r.Text("degraded_reason"),
         .ssh_address = r.Text("ssh_address"),
         .ssh_port_low = r.Int("ssh_port_low"),
         .ssh_port_high = r.Int("ssh_port_high")};
  if (!h.inventory.is_object()) h.inventory = nlohmann::json::object();
  return h;
}

core::Result<std::optional<Host>> One(core::Result<std::optional<store::Row>> row) {
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<Host>();
  return std::optional<Host>(HostOf(**row));
}

/// The SQL condition (over the hosts row aliased `alias`) that a host may take a new instance
/// now apart from being free: not drained, not degraded, engine fine, heard from recently. It
/// takes one parameter: the oldest `last_seen_at` (Unix seconds) that still counts as heard from.
std::string UsableSql(std::string_view alias) {
  const std::string a(alias);
  return a + ".drained = 0 AND " + a + ".degraded_reason = '' AND " + a +
         ".engine_error = '' AND " + a + ".last_seen_at >= ?";
}

/// "no placement holds host `alias`".
std::string FreeSql(std::string_view alias) {
  return "NOT EXISTS (SELECT 1 FROM placements p WHERE p.host_id = " + std::string(alias) + ".id)";
}

/// The pairs of `gpu_type`: both members joined as h0 (node 0) and h1 (node 1).
constexpr std::string_view kPairsFrom =
    "FROM host_pair_members m0 JOIN host_pair_members m1 ON m1.pair_id = m0.pair_id AND "
    "m1.node_index = 1 JOIN hosts h0 ON h0.id = m0.host_id JOIN hosts h1 ON h1.id = m1.host_id "
    "WHERE m0.node_index = 0 AND h0.gpu_type = ? AND h1.gpu_type = h0.gpu_type";

}  // namespace

core::Result<std::optional<Host>> HostTable::FindByName(store::Transaction& tx,
                                                        const std::string& name) {
  return One(tx.QueryOne("SELECT " + std::string(kHostColumns) + " FROM hosts h WHERE h.name = ?",
                         {name}));
}

core::Result<std::optional<Host>> HostTable::FindByTokenHash(store::Transaction& tx,
                                                             const std::string& token_hash) {
  return One(
      tx.QueryOne("SELECT " + std::string(kHostColumns) + " FROM hosts h WHERE h.token_hash = ?",
                  {token_hash}));
}

namespace {

/// Hosts joined with their placement and pair: kHostColumns, instance_id, instance_name,
/// pair_id, node_index, rail_address, partner. `where` and `tail` (ORDER BY, LIMIT) are appended.
std::string HostsWithPlacementAndPair(std::string_view where, std::string_view tail) {
  return "SELECT " + std::string(kHostColumns) +
         ", p.instance_id, i.name AS instance_name, m.pair_id, m.node_index, m.rail_address, "
         "h2.name AS partner "
         "FROM hosts h LEFT JOIN placements p ON p.host_id = h.id LEFT JOIN instances i ON i.id = "
         "p.instance_id LEFT JOIN host_pair_members m ON m.host_id = h.id LEFT JOIN "
         "host_pair_members m2 ON "
         "m2.pair_id = m.pair_id AND m2.host_id <> h.id LEFT JOIN hosts h2 ON h2.id = "
         "m2.host_id " +
         std::string(where) + " " + std::string(tail);
}

Host HostWithPlacementAndPairOf(const store::Row& r) {
  Host h = HostOf(r);
  h.instance_id = r.Text("instance_id");
  h.instance_name = r.Text("instance_name");
  h.pair_id = r.Text("pair_id");
  h.node_index = r.Int("node_index");
  h.rail_address = r.Text("rail_address");
  h.partner = r.Text("partner");
  return h;
}

}  // namespace

core::Result<std::pair<std::vector<Host>, int64_t>> HostTable::PageWithPlacementAndPair(
    store::Transaction& tx, int64_t limit, int64_t offset) {
  std::pair<std::vector<Host>, int64_t> out;
  GPUWERK_ASSIGN_OR_RETURN(auto count, tx.QueryOne("SELECT COUNT(*) AS n FROM hosts"));
  out.second = count->Int("n");
  GPUWERK_ASSIGN_OR_RETURN(auto rows, tx.Query(HostsWithPlacementAndPair("",
                                                                         "ORDER BY h.name "
                                                                         "LIMIT ? OFFSET ?"),
                                               {limit, offset}));
  for (const auto& r : rows) out.first.push_back(HostWithPlacementAndPairOf(r));
  return out;
}

core::Result<std::optional<Host>> HostTable::FindWithPlacementAndPair(store::Transaction& tx,
                                                                      const std::string& name) {
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           tx.QueryOne(HostsWithPlacementAndPair("WHERE h.name = ?", ""), {name}));
  if (!row) return std::optional<Host>();
  return std::optional<Host>(HostWithPlacementAndPairOf(*row));
}

core::Result<int64_t> HostTable::CountOfType(store::Transaction& tx, const std::string& gpu_type) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM hosts WHERE gpu_type = ?", {gpu_type}));
  return row->Int("n");
}

core::Result<void> HostTable::Insert(store::Transaction& tx, const Host& host,
                                     const std::string& token_hash) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO hosts (id, name, gpu_type, token_hash, gpu_required, drained, created_at, "
      "inventory, engine_error, ssh_address, ssh_port_low, ssh_port_high) VALUES (?, ?, ?, ?, ?, "
      "0, ?, '{}', '', ?, ?, ?)",
      {host.id, host.name, host.gpu_type, token_hash, int64_t{host.gpu_required ? 1 : 0},
       host.created_at, host.ssh_address, host.ssh_port_low, host.ssh_port_high}));
  return {};
}

core::Result<void> HostTable::SetSsh(store::Transaction& tx, const std::string& id,
                                     const SshRegistration& ssh) {
  GPUWERK_TRY(
      tx.Exec("UPDATE hosts SET ssh_address = ?, ssh_port_low = ?, ssh_port_high = ? WHERE id = ?",
              {ssh.address, ssh.port_low, ssh.port_high, id}));
  return {};
}

core::Result<void> HostTable::SetToken(store::Transaction& tx, const std::string& id,
                                       const std::string& token_hash, bool gpu_required) {
  GPUWERK_TRY(tx.Exec("UPDATE hosts SET token_hash = ?, gpu_required = ? WHERE id = ?",
                      {token_hash, int64_t{gpu_required ? 1 : 0}, id}));
  return {};
}

core::Result<void> HostTable::SetDrained(store::Transaction& tx, const std::string& id,
                                         bool drained) {
  if (drained) {
    GPUWERK_TRY(tx.Exec("UPDATE hosts SET drained = 1 WHERE id = ?", {id}));
  } else {
    GPUWERK_TRY(tx.Exec("UPDATE hosts SET drained = 0, degraded_reason = '' WHERE id = ?", {id}));
  }
  return {};
}

core::Result<void> HostTable::RecordSync(store::Transaction& tx, const std::string& id,
                                         const HostSyncRecord& sync) {
  GPUWERK_TRY(
      tx.Exec("UPDATE hosts SET last_seen_at = ?, inventory = ?, engine_error = ?, "
              "degraded_reason = ? WHERE id = ?",
              {sync.last_seen_at, sync.inventory, sync.engine_error, sync.degraded_reason, id}));
  return {};
}

core::Result<void> HostTable::Delete(store::Transaction& tx, const std::string& id) {
  GPUWERK_TRY(tx.Exec("DELETE FROM hosts WHERE id = ?", {id}));
  return {};
}

core::Result<std::vector<Slot>> HostTable::FreeSlots(store::Transaction& tx,
                                                     const std::string& gpu_type,
                                                     int64_t hosts_per_instance, int64_t limit,
                                                     int64_t now, int64_t unknown_after,
                                                     const std::string& from_name) {
  std::vector<Slot> out;
  const int64_t since = now - unknown_after;
  if (hosts_per_instance == 1) {
    static const std::string kSql =
        "SELECT h.id, h.name FROM hosts h WHERE h.name >= ? AND h.gpu_type = ? AND " +
        UsableSql("h") + " AND " + FreeSql("h") + " ORDER BY h.name LIMIT ?";
    GPUWERK_ASSIGN_OR_RETURN(auto rows, tx.Query(kSql, {from_name, gpu_type, since, limit}));
    for (const auto& r : rows) out.push_back({{r.Text("id")}, r.Text("name")});
  } else if (hosts_per_instance == 2) {
    static const std::string kSql =
        "SELECT h0.id AS id0, h1.id AS id1, h0.name AS name " + std::string(kPairsFrom) +
        " AND h0.name >= ? AND " + UsableSql("h0") + " AND " + UsableSql("h1") + " AND " +
        FreeSql("h0") + " AND " + FreeSql("h1") + " ORDER BY h0.name LIMIT ?";
    GPUWERK_ASSIGN_OR_RETURN(auto rows, tx.Query(kSql, {gpu_type, from_name, since, since, limit}));
    for (const auto& r : rows) out.push_back({{r.Text("id0"), r.Text("id1")}, r.Text("name")});
  }
  return out;
}

core::Result<std::vector<Slot>> HostTable::SlotsOf(store::Transaction& tx,
                                                   const std::string& gpu_type,
                                                   int64_t hosts_per_instance,
                                                   const std::vector<std::string>& host_ids,
                                                   int64_t now, int64_t unknown_after) {
  std::vector<Slot> out;
  const int64_t since = now - unknown_after;
  for (const auto& id : host_ids) {
    std::optional<store::Row> row;
    if (hosts_per_instance == 1) {
      static const std::string kSql =
          "SELECT h.id, h.name FROM hosts h WHERE h.id = ? AND h.gpu_type = ? AND " +
          UsableSql("h") + " AND " + FreeSql("h");
      GPUWERK_ASSIGN_OR_RETURN(row, tx.QueryOne(kSql, {id, gpu_type, since}));
      if (row) out.push_back({{row->Text("id")}, row->Text("name")});
    } else if (hosts_per_instance == 2) {
      static const std::string kSql =
          "SELECT h0.id AS id0, h1.id AS id1, h0.name AS name " + std::string(kPairsFrom) +
          " AND m0.pair_id = (SELECT pair_id FROM host_pair_members WHERE host_id = ?) AND " +
          UsableSql("h0") + " AND " + UsableSql("h1") + " AND " + FreeSql("h0") + " AND " +
          FreeSql("h1");
      GPUWERK_ASSIGN_OR_RETURN(row, tx.QueryOne(kSql, {gpu_type, id, since, since}));
      if (row) out.push_back({{row->Text("id0"), row->Text("id1")}, row->Text("name")});
    }
  }
  std::sort(out.begin(), out.end(), [](const Slot& a, const Slot& b) { return a.name < b.name; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Slot& a, const Slot& b) { return a.name == b.name; }),
            out.end());
  return out;
}

core::Result<Capacity> HostTable::LoadCapacity(store::Transaction& tx, const std::string& gpu_type,
                                               int64_t hosts_per_instance, int64_t now,
                                               int64_t unknown_after) {
  const int64_t since = now - unknown_after;
  Capacity out;
  static const std::string kHostsSql =
      "SELECT COUNT(*) AS hosts, COALESCE(SUM(CASE WHEN h.last_seen_at >= ? THEN 1 ELSE 0 END), "
      "0) AS heard, COALESCE(SUM(CASE WHEN " +
      UsableSql("h") + " THEN 1 ELSE 0 END), 0) AS usable, COALESCE(SUM(CASE WHEN " +
      UsableSql("h") + " AND " + FreeSql("h") +
      " THEN 1 ELSE 0 END), 0) AS free FROM hosts h WHERE h.gpu_type = ?";
  GPUWERK_ASSIGN_OR_RETURN(auto hosts, tx.QueryOne(kHostsSql, {since, since, since, gpu_type}));
  out.hosts = hosts->Int("hosts");
  out.heard_hosts = hosts->Int("heard");
  if (hosts_per_instance == 1) {
    out.online = hosts->Int("usable") > 0;
    out.free_slots = hosts->Int("free");
  } else if (hosts_per_instance == 2) {
    static const std::string kPairsSql =
        "SELECT COUNT(*) AS pairs, COALESCE(SUM(CASE WHEN " + UsableSql("h0") + " AND " +
        UsableSql("h1") + " THEN 1 ELSE 0 END), 0) AS usable, COALESCE(SUM(CASE WHEN " +
        UsableSql("h0") + " AND " + UsableSql("h1") + " AND " + FreeSql("h0") + " AND " +
        FreeSql("h1") + " THEN 1 ELSE 0 END), 0) AS free " + std::string(kPairsFrom);
    GPUWERK_ASSIGN_OR_RETURN(auto pairs,
                             tx.QueryOne(kPairsSql, {since, since, since, since, gpu_type}));
    out.pairs = pairs->Int("pairs");
    out.online = pairs->Int("usable") > 0;
    out.free_slots = pairs->Int("free");
  }
  return out;
}

}  // namespace gpuwerk::sched::internal
