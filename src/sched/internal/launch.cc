#include "sched/internal/launch.h"

#include <algorithm>

#include "store/audit_log.h"

namespace gpuwerk::sched::internal {
namespace {

/// `<name>-<5 random base32 chars>`, the name cut so the result stays a DNS label.
std::string NewHostname(core::Rng& rng, const std::string& name) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  unsigned char bytes[5];
  rng.Fill(bytes, sizeof bytes);
  std::string prefix = name.substr(0, 57);
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  std::string out = prefix + "-";
  for (unsigned char b : bytes) out += kAlphabet[b % 32];
  return out;
}

}  // namespace

core::Result<TypeRow> LoadType(store::Transaction& tx, const std::string& gpu_type) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto type, tx.QueryOne("SELECT hosts_per_instance, price_minor_per_hour, currency FROM "
                             "gpu_types WHERE name = ?",
                             {gpu_type}));
  if (!type) {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "unknown_gpu_type",
                                  "There is no GPU type by that name; see gpuwerk gpu-types.")
                          .WithDetail("gpu_type", gpu_type));
  }
  return TypeRow{.hosts_per_instance = type->Int(0),
                 .price_minor_per_hour = type->Int(1),
                 .currency = type->Text(2)};
}

std::string UsableHostSql(std::string_view alias) {
  const std::string a(alias);
  return a + ".drained = 0 AND " + a + ".degraded_reason = '' AND " + a +
         ".engine_error = '' AND " + a + ".last_seen_at >= ?";
}

namespace {

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

core::Result<std::vector<Slot>> FreeSlots(store::Transaction& tx, const std::string& gpu_type,
                                          int64_t hosts_per_instance, int64_t limit, int64_t now,
                                          int64_t unknown_after, const std::string& from_name) {
  std::vector<Slot> out;
  const int64_t since = now - unknown_after;
  if (hosts_per_instance == 1) {
    static const std::string kSql =
        "SELECT h.id, h.name FROM hosts h WHERE h.name >= ? AND h.gpu_type = ? AND " +
        UsableHostSql("h") + " AND " + FreeSql("h") + " ORDER BY h.name LIMIT ?";
    GPUWERK_ASSIGN_OR_RETURN(auto rows, tx.Query(kSql, {from_name, gpu_type, since, limit}));
    for (const auto& r : rows) out.push_back({{r.Text(0)}, r.Text(1)});
  } else if (hosts_per_instance == 2) {
    static const std::string kSql = "SELECT h0.id, h1.id, h0.name " + std::string(kPairsFrom) +
                                    " AND h0.name >= ? AND " + UsableHostSql("h0") + " AND " +
                                    UsableHostSql("h1") + " AND " + FreeSql("h0") + " AND " +
                                    FreeSql("h1") + " ORDER BY h0.name LIMIT ?";
    GPUWERK_ASSIGN_OR_RETURN(auto rows, tx.Query(kSql, {gpu_type, from_name, since, since, limit}));
    for (const auto& r : rows) out.push_back({{r.Text(0), r.Text(1)}, r.Text(2)});
  }
  return out;
}

core::Result<std::vector<Slot>> SlotsOf(store::Transaction& tx, const std::string& gpu_type,
                                        int64_t hosts_per_instance,
                                        const std::vector<std::string>& host_ids, int64_t now,
                                        int64_t unknown_after) {
  std::vector<Slot> out;
  const int64_t since = now - unknown_after;
  for (const auto& id : host_ids) {
    std::optional<store::Row> row;
    if (hosts_per_instance == 1) {
      static const std::string kSql =
          "SELECT h.id, h.name FROM hosts h WHERE h.id = ? AND "
          "h.gpu_type = ? AND " +
          UsableHostSql("h") + " AND " + FreeSql("h");
      GPUWERK_ASSIGN_OR_RETURN(row, tx.QueryOne(kSql, {id, gpu_type, since}));
      if (row) out.push_back({{row->Text(0)}, row->Text(1)});
    } else if (hosts_per_instance == 2) {
      static const std::string kSql =
          "SELECT h0.id, h1.id, h0.name " + std::string(kPairsFrom) +
          " AND m0.pair_id = (SELECT pair_id FROM host_pair_members WHERE host_id = ?) AND " +
          UsableHostSql("h0") + " AND " + UsableHostSql("h1") + " AND " + FreeSql("h0") + " AND " +
          FreeSql("h1");
      GPUWERK_ASSIGN_OR_RETURN(row, tx.QueryOne(kSql, {gpu_type, id, since, since}));
      if (row) out.push_back({{row->Text(0), row->Text(1)}, row->Text(2)});
    }
  }
  std::sort(out.begin(), out.end(), [](const Slot& a, const Slot& b) { return a.name < b.name; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Slot& a, const Slot& b) { return a.name == b.name; }),
            out.end());
  return out;
}

core::Result<Capacity> LoadCapacity(store::Transaction& tx, const std::string& gpu_type,
                                    int64_t hosts_per_instance, int64_t now,
                                    int64_t unknown_after) {
  const int64_t since = now - unknown_after;
  Capacity out;
  static const std::string kHostsSql =
      "SELECT COUNT(*), COALESCE(SUM(CASE WHEN h.last_seen_at >= ? THEN 1 ELSE 0 END), 0), "
      "COALESCE(SUM(CASE WHEN " +
      UsableHostSql("h") + " THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN " + UsableHostSql("h") +
      " AND " + FreeSql("h") + " THEN 1 ELSE 0 END), 0) FROM hosts h WHERE h.gpu_type = ?";
  GPUWERK_ASSIGN_OR_RETURN(auto hosts, tx.QueryOne(kHostsSql, {since, since, since, gpu_type}));
  out.hosts = hosts->Int(0);
  out.heard_hosts = hosts->Int(1);
  if (hosts_per_instance == 1) {
    out.online = hosts->Int(2) > 0;
    out.free_slots = hosts->Int(3);
  } else if (hosts_per_instance == 2) {
    static const std::string kPairsSql =
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN " + UsableHostSql("h0") + " AND " +
        UsableHostSql("h1") + " THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN " +
        UsableHostSql("h0") + " AND " + UsableHostSql("h1") + " AND " + FreeSql("h0") + " AND " +
        FreeSql("h1") + " THEN 1 ELSE 0 END), 0) " + std::string(kPairsFrom);
    GPUWERK_ASSIGN_OR_RETURN(auto pairs,
                             tx.QueryOne(kPairsSql, {since, since, since, since, gpu_type}));
    out.pairs = pairs->Int(0);
    out.online = pairs->Int(1) > 0;
    out.free_slots = pairs->Int(2);
  }
  return out;
}

core::Result<void> CheckNameFree(store::Transaction& tx, const std::string& person_id,
                                 const std::string& name, const std::string& except_entry_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto clash, tx.QueryOne("SELECT id FROM instances WHERE person_id = ? AND name = ? AND "
                              "deleted_at IS NULL",
                              {person_id, name}));
  if (clash) {
    return core::Fail(core::ErrorCode::kAlreadyExists, "name_taken",
                      "You already have an instance named '" + name + "'.");
  }
  GPUWERK_ASSIGN_OR_RETURN(
      auto queued, tx.QueryOne("SELECT id, gpu_type FROM queue_entries WHERE person_id = ? AND "
                               "name = ? AND status = 'open' AND id <> ?",
                               {person_id, name, except_entry_id}));
  if (queued) {
    return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "name_taken",
                                  "Your queue entry for " + queued->Text(1) +
                                      " already has the "
                                      "name '" +
                                      name + "'.")
                          .WithDetail("queue_entry_id", queued->Text(0)));
  }
  return {};
}

core::Result<std::string> InsertInstance(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                         const SchedOptions& options, const LaunchSpec& spec) {
  const int64_t now = clock.NowUnix();
  GPUWERK_ASSIGN_OR_RETURN(auto key, tx.QueryOne("SELECT public_key FROM ssh_keys WHERE id = ? "
                                                 "AND person_id = ?",
                                                 {spec.ssh_key_id, spec.person_id}));
  if (!key) return core::NotFound("SSH key");
  GPUWERK_ASSIGN_OR_RETURN(TypeRow type, LoadType(tx, spec.gpu_type));
  std::string hostname;
  for (int i = 0;; ++i) {
    hostname = NewHostname(rng, spec.name);
    GPUWERK_ASSIGN_OR_RETURN(
        auto taken, tx.QueryOne("SELECT id FROM instances WHERE hostname = ?", {hostname}));
    if (!taken) break;
    if (i > 20) return core::Internal("could not find a free hostname");
  }
  const std::string id = core::NewId(rng, "ins");
  const std::string session_id = core::NewId(rng, "bil");
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO instances (id, person_id, name, ssh_key_id, public_key, gpu_type, hostname, "
      "image, desired, restart_generation, status, status_reason, created_at, "
      "billing_session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', 0, 'provisioning', '', "
      "?, ?)",
      {id, spec.person_id, spec.name, spec.ssh_key_id, key->Text(0), spec.gpu_type, hostname,
       options.instance_image, now, session_id}));
  for (size_t node = 0; node < spec.host_ids.size(); ++node) {
    GPUWERK_TRY(
        tx.Exec("INSERT INTO placements (instance_id, host_id, node_index) VALUES (?, ?, ?)",
                {id, spec.host_ids[node], static_cast<int64_t>(node)}));
  }
  GPUWERK_TRY(
      tx.Exec("INSERT INTO billing_sessions (id, instance_id, person_id, instance_name, gpu_type, "
              "price_minor_per_hour, currency, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
              {session_id, id, spec.person_id, spec.name, spec.gpu_type, type.price_minor_per_hour,
               type.currency, now}));
  nlohmann::json detail = {{"name", spec.name},
                           {"gpu_type", spec.gpu_type},
                           {"hostname", hostname},
                           {"ssh_key_id", spec.ssh_key_id},
                           {"billing_session_id", session_id}};
  if (spec.audit_detail.is_object()) detail.update(spec.audit_detail);
  GPUWERK_TRY(store::RecordAudit(tx, clock, rng,
                                 {.actor_id = spec.actor_id,
                                  .action = "instance.create",
                                  .target = id,
                                  .source_address = spec.source_address,
                                  .detail = std::move(detail)}));
  return id;
}

}  // namespace gpuwerk::sched::internal
