#include "sched/instance_table.h"

#include <algorithm>

namespace gpuwerk::sched {
namespace {

constexpr std::string_view kColumns =
    "id, person_id, name, ssh_key_id, public_key, gpu_type, hostname, image, desired, "
    "restart_generation, status, status_reason, created_at, deleted_at, billing_session_id, "
    "drift_kind, drift_reason, drift_at, drift_count, drift_in_status, drift_mailed_at";

std::string Select(std::string_view where) {
  return "SELECT " + std::string(kColumns) + " FROM instances WHERE " + std::string(where);
}

InstanceRow RowOf(const store::Row& r) {
  return InstanceRow{
      .id = r.Text("id"),
      .person_id = r.Text("person_id"),
      .name = r.Text("name"),
      .ssh_key_id = r.Text("ssh_key_id"),
      .public_key = r.Text("public_key"),
      .gpu_type = r.Text("gpu_type"),
      .hostname = r.Text("hostname"),
      .image = r.Text("image"),
      .desired = DesiredStateFrom(r.Text("desired")).value_or(DesiredState::kRunning),
      .restart_generation = r.Int("restart_generation"),
      .status = InstanceStatusFrom(r.Text("status")).value_or(InstanceStatus::kUnknown),
      .status_reason = r.Text("status_reason"),
      .created_at = r.Int("created_at"),
      .deleted_at = r.OptInt("deleted_at"),
      .billing_session_id = r.Text("billing_session_id"),
      .drift_kind = r.Text("drift_kind"),
      .drift_reason = r.Text("drift_reason"),
      .drift_at = r.OptInt("drift_at"),
      .drift_count = r.Int("drift_count"),
      .drift_in_status = r.Int("drift_in_status") != 0,
      .drift_mailed_at = r.OptInt("drift_mailed_at")};
}

core::Result<std::optional<InstanceRow>> One(core::Result<std::optional<store::Row>> row) {
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<InstanceRow>();
  return std::optional<InstanceRow>(RowOf(**row));
}

core::Result<std::vector<InstanceRow>> Many(core::Result<std::vector<store::Row>> rows) {
  if (!rows) return std::unexpected(rows.error());
  std::vector<InstanceRow> out;
  out.reserve(rows->size());
  for (const auto& r : *rows) out.push_back(RowOf(r));
  return out;
}

/// The WHERE clause of an InstanceFilter: its parameters are FilterParams' five, in order.
constexpr std::string_view kFilterSql =
    "(? = 1 OR deleted_at IS NULL) AND (? = '' OR status = ?) AND (? = '' OR id IN (SELECT "
    "p.instance_id FROM placements p JOIN hosts h ON h.id = p.host_id WHERE h.name = ?))";

std::string Label(InstanceStatus s) { return std::string(ToString(s)); }
std::string Label(DesiredState d) { return std::string(ToString(d)); }

}  // namespace

core::Result<std::optional<InstanceRow>> InstanceTable::Find(store::Transaction& tx,
                                                             const std::string& id) {
  return One(tx.QueryOne(Select("id = ?"), {id}));
}

core::Result<std::optional<InstanceRow>> InstanceTable::FindOwned(store::Transaction& tx,
                                                                  const std::string& person_id,
                                                                  const std::string& id) {
  return One(tx.QueryOne(Select("id = ? AND person_id = ?"), {id, person_id}));
}

core::Result<std::optional<InstanceRow>> InstanceTable::FindLive(store::Transaction& tx,
                                                                 const std::string& person_id,
                                                                 const std::string& id_or_name) {
  return One(tx.QueryOne(Select("person_id = ? AND deleted_at IS NULL AND (id = ? OR name = ?) "
                                "ORDER BY created_at LIMIT 1"),
                         {person_id, id_or_name, id_or_name}));
}

core::Result<std::optional<InstanceRow>> InstanceTable::FindLiveByName(store::Transaction& tx,
                                                                       const std::string& person_id,
                                                                       const std::string& name) {
  return One(
      tx.QueryOne(Select("person_id = ? AND name = ? AND deleted_at IS NULL"), {person_id, name}));
}

core::Result<std::optional<InstanceRow>> InstanceTable::FindByHostname(
    store::Transaction& tx, const std::string& hostname) {
  return One(tx.QueryOne(Select("hostname = ?"), {hostname}));
}

core::Result<std::vector<InstanceRow>> InstanceTable::ListLive(store::Transaction& tx,
                                                               const std::string& person_id,
                                                               int64_t limit, int64_t offset) {
  if (limit < 0) {
    return Many(tx.Query(Select("person_id = ? AND deleted_at IS NULL ORDER BY created_at, id"),
                         {person_id}));
  }
  return Many(tx.Query(Select("person_id = ? AND deleted_at IS NULL ORDER BY created_at, id "
                              "LIMIT ? OFFSET ?"),
                       {person_id, limit, offset}));
}

core::Result<int64_t> InstanceTable::CountLive(store::Transaction& tx,
                                               const std::string& person_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM instances WHERE person_id = ? AND "
                            "deleted_at IS NULL",
                            {person_id}));
  return row->Int("n");
}

core::Result<int64_t> InstanceTable::CountLiveOfType(store::Transaction& tx,
                                                     const std::string& gpu_type) {
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           tx.QueryOne("SELECT COUNT(*) AS n FROM instances WHERE gpu_type = ? AND "
                                       "deleted_at IS NULL",
                                       {gpu_type}));
  return row->Int("n");
}

core::Result<std::vector<InstanceRow>> InstanceTable::ListLiveWithKey(store::Transaction& tx,
                                                                      const std::string& person_id,
                                                                      const std::string& key_id) {
  return Many(tx.Query(Select("ssh_key_id = ? AND person_id = ? AND deleted_at IS NULL "
                              "ORDER BY name"),
                       {key_id, person_id}));
}

core::Result<std::vector<InstanceRow>> InstanceTable::ListRunningWithKeys(
    store::Transaction& tx, const std::vector<std::string>& key_ids) {
  std::vector<InstanceRow> out;
  for (const auto& key_id : key_ids) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, Many(tx.Query(Select("ssh_key_id = ? AND deleted_at IS NULL AND desired = ?"),
                                 {key_id, Label(DesiredState::kRunning)})));
    for (auto& r : rows) out.push_back(std::move(r));
  }
  return out;
}

core::Result<void> InstanceTable::Insert(store::Transaction& tx, const InstanceRow& row) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO instances (id, person_id, name, ssh_key_id, public_key, gpu_type, hostname, "
      "image, desired, restart_generation, status, status_reason, created_at, deleted_at, "
      "billing_session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {row.id, row.person_id, row.name, row.ssh_key_id, row.public_key, row.gpu_type, row.hostname,
       row.image, Label(row.desired), row.restart_generation, Label(row.status), row.status_reason,
       row.created_at, store::Nullable(row.deleted_at), row.billing_session_id}));
  return {};
}

core::Result<void> InstanceTable::RecordDrift(store::Transaction& tx, const std::string& id,
                                              const std::string& kind, const std::string& reason,
                                              int64_t now) {
  GPUWERK_TRY(
      tx.Exec("UPDATE instances SET drift_kind = ?, drift_reason = ?, drift_at = ?, "
              "drift_count = drift_count + 1, drift_in_status = 1 WHERE id = ?",
              {kind, reason, now, id}));
  return {};
}

core::Result<void> InstanceTable::MarkDriftMailed(store::Transaction& tx, const std::string& id,
                                                  int64_t now) {
  GPUWERK_TRY(tx.Exec("UPDATE instances SET drift_mailed_at = ? WHERE id = ?", {now, id}));
  return {};
}

core::Result<void> InstanceTable::BumpRestart(store::Transaction& tx, const std::string& id) {
  GPUWERK_TRY(
      tx.Exec("UPDATE instances SET restart_generation = restart_generation + 1, status = ?, "
              "status_reason = '', drift_in_status = 0 WHERE id = ?",
              {Label(InstanceStatus::kRestarting), id}));
  return {};
}

core::Result<void> InstanceTable::MarkDeleting(store::Transaction& tx, const std::string& id) {
  GPUWERK_TRY(
      tx.Exec("UPDATE instances SET desired = ?, status = ?, status_reason = '' WHERE id = ?",
              {Label(DesiredState::kDeleted), Label(InstanceStatus::kDeleting), id}));
  return {};
}

core::Result<void> InstanceTable::SetStatus(store::Transaction& tx, const std::string& id,
                                            InstanceStatus status, const std::string& reason) {
  const std::string label = Label(status);
  GPUWERK_TRY(
      tx.Exec("UPDATE instances SET status = ?, status_reason = ? WHERE id = ? AND "
              "(status <> ? OR status_reason <> ?)",
              {label, reason, id, label, reason}));
  return {};
}

core::Result<void> InstanceTable::MarkFinallyDeleted(store::Transaction& tx, const std::string& id,
                                                     int64_t now) {
  GPUWERK_TRY(
      tx.Exec("UPDATE instances SET deleted_at = ?, status = ?, status_reason = '' WHERE id = ?",
              {now, Label(InstanceStatus::kDeleted), id}));
  return {};
}

core::Result<void> InstanceTable::RetireFailed(store::Transaction& tx, const std::string& id,
                                               int64_t now) {
  GPUWERK_TRY(
      tx.Exec("UPDATE instances SET desired = ?, status = ?, deleted_at = ? WHERE id = ? AND "
              "status = ? AND deleted_at IS NULL",
              {Label(DesiredState::kDeleted), Label(InstanceStatus::kDeleted), now, id,
               Label(InstanceStatus::kFailed)}));
  return {};
}

core::Result<bool> InstanceTable::MarkUnknown(store::Transaction& tx, const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n,
      tx.Exec("UPDATE instances SET status = ?, status_reason = 'host not heard from' WHERE "
              "id = ? AND deleted_at IS NULL AND desired = ? AND status NOT IN (?, ?)",
              {Label(InstanceStatus::kUnknown), id, Label(DesiredState::kRunning),
               Label(InstanceStatus::kFailed), Label(InstanceStatus::kUnknown)}));
  return n > 0;
}

core::Result<std::vector<InstanceRow>> InstanceTable::PageAll(store::Transaction& tx,
                                                              const InstanceFilter& filter,
                                                              const core::KeysetQuery& query,
                                                              int64_t limit) {
  const int64_t deleted = filter.include_deleted ? 1 : 0;
  const std::string where(kFilterSql);
  const std::string lim = " LIMIT " + std::to_string(std::max<int64_t>(limit, 0));
  if (query.before) {
    return Many(tx.Query(Select(where +
                                " AND (created_at < ? OR (created_at = ? AND id < ?)) ORDER BY "
                                "created_at DESC, id DESC" +
                                lim),
                         {deleted, filter.status, filter.status, filter.host, filter.host,
                          query.before->at, query.before->at, query.before->id}));
  }
  if (query.after) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, Many(tx.Query(Select(where +
                                        " AND (created_at > ? OR (created_at = ? AND id > ?)) "
                                        "ORDER BY created_at ASC, id ASC" +
                                        lim),
                                 {deleted, filter.status, filter.status, filter.host, filter.host,
                                  query.after->at, query.after->at, query.after->id})));
    std::reverse(rows.begin(), rows.end());
    return rows;
  }
  return Many(tx.Query(Select(where + " ORDER BY created_at DESC, id DESC" + lim),
                       {deleted, filter.status, filter.status, filter.host, filter.host}));
}

core::Result<int64_t> InstanceTable::CountAll(store::Transaction& tx, const InstanceFilter& filter,
                                              const std::optional<core::KeysetKey>& newer_than) {
  const int64_t deleted = filter.include_deleted ? 1 : 0;
  const std::string sql = "SELECT COUNT(*) AS n FROM instances WHERE " + std::string(kFilterSql);
  std::optional<store::Row> row;
  if (newer_than) {
    GPUWERK_ASSIGN_OR_RETURN(
        row, tx.QueryOne(sql + " AND (created_at > ? OR (created_at = ? AND id > ?))",
                         {deleted, filter.status, filter.status, filter.host, filter.host,
                          newer_than->at, newer_than->at, newer_than->id}));
  } else {
    GPUWERK_ASSIGN_OR_RETURN(
        row, tx.QueryOne(sql, {deleted, filter.status, filter.status, filter.host, filter.host}));
  }
  return row ? row->Int("n") : 0;
}

}  // namespace gpuwerk::sched
