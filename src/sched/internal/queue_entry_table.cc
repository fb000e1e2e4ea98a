#include "sched/internal/queue_entry_table.h"

#include "auth/person_table.h"
#include "keys/ssh_key_table.h"

namespace gpuwerk::sched::internal {
namespace {

constexpr std::string_view kColumns =
    "q.id, q.person_id, q.gpu_type, q.seq, q.name, q.ssh_key_id, q.status, q.entered_at, "
    "q.left_at, q.instance_id, q.last_failure, q.launch_attempts, q.passed_over_at";

std::string Select(std::string_view where) {
  return "SELECT " + std::string(kColumns) + " FROM queue_entries q WHERE " + std::string(where);
}

std::string Label(QueueEntryStatus s) { return std::string(ToString(s)); }

QueueEntryRow RowOf(const store::Row& r) {
  return QueueEntryRow{
      .id = r.Text("id"),
      .person_id = r.Text("person_id"),
      .gpu_type = r.Text("gpu_type"),
      .seq = r.Int("seq"),
      .name = r.Text("name"),
      .ssh_key_id = r.Text("ssh_key_id"),
      .status = QueueEntryStatusFrom(r.Text("status")).value_or(QueueEntryStatus::kCancelled),
      .entered_at = r.Int("entered_at"),
      .left_at = r.OptInt("left_at"),
      .instance_id = r.Text("instance_id"),
      .last_failure = r.Text("last_failure"),
      .launch_attempts = r.Int("launch_attempts"),
      .passed_over_at = r.OptInt("passed_over_at")};
}

core::Result<std::optional<QueueEntryRow>> One(core::Result<std::optional<store::Row>> row) {
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<QueueEntryRow>();
  return std::optional<QueueEntryRow>(RowOf(**row));
}

core::Result<std::vector<QueueEntryRow>> Many(core::Result<std::vector<store::Row>> rows) {
  if (!rows) return std::unexpected(rows.error());
  std::vector<QueueEntryRow> out;
  for (const auto& r : *rows) out.push_back(RowOf(r));
  return out;
}

core::Result<int64_t> Count(core::Result<std::optional<store::Row>> row) {
  if (!row) return std::unexpected(row.error());
  return (*row)->Int("n");
}

}  // namespace

core::Result<std::optional<QueueEntryRow>> QueueEntryTable::Find(store::Transaction& tx,
                                                                 const std::string& id) {
  return One(tx.QueryOne(Select("q.id = ?"), {id}));
}

core::Result<std::optional<QueueEntryRow>> QueueEntryTable::FindLeft(store::Transaction& tx,
                                                                     const std::string& person_id,
                                                                     const std::string& id) {
  return One(tx.QueryOne(Select("q.id = ? AND q.person_id = ? AND q.status <> ?"),
                         {id, person_id, Label(QueueEntryStatus::kOpen)}));
}

core::Result<std::optional<QueueEntryRow>> QueueEntryTable::FindOpen(store::Transaction& tx,
                                                                     const std::string& person_id,
                                                                     const std::string& gpu_type) {
  return One(tx.QueryOne(Select("q.person_id = ? AND q.gpu_type = ? AND q.status = ?"),
                         {person_id, gpu_type, Label(QueueEntryStatus::kOpen)}));
}

core::Result<std::optional<QueueEntryRow>> QueueEntryTable::FindOpenByName(
    store::Transaction& tx, const std::string& person_id, const std::string& name,
    const std::string& except_id) {
  return One(tx.QueryOne(Select("q.person_id = ? AND q.name = ? AND q.status = ? AND q.id <> ?"),
                         {person_id, name, Label(QueueEntryStatus::kOpen), except_id}));
}

core::Result<std::optional<QueueEntryRow>> QueueEntryTable::FindOpenByIdOrName(
    store::Transaction& tx, const std::string& person_id, const std::string& id_or_name) {
  return One(tx.QueryOne(Select("q.person_id = ? AND q.status = ? AND (q.id = ? OR q.name = ?) "
                                "ORDER BY q.seq LIMIT 1"),
                         {person_id, Label(QueueEntryStatus::kOpen), id_or_name, id_or_name}));
}

core::Result<std::vector<QueueEntryRow>> QueueEntryTable::ListOpenOf(store::Transaction& tx,
                                                                     const std::string& person_id) {
  return Many(tx.Query(Select("q.person_id = ? AND q.status = ? ORDER BY q.entered_at, q.id"),
                       {person_id, Label(QueueEntryStatus::kOpen)}));
}

core::Result<std::vector<QueueEntryRow>> QueueEntryTable::ListOpenOf(store::Transaction& tx,
                                                                     const std::string& person_id,
                                                                     int64_t limit,
                                                                     int64_t offset) {
  return Many(tx.Query(
      Select("q.person_id = ? AND q.status = ? ORDER BY q.entered_at, q.id LIMIT ? OFFSET ?"),
      {person_id, Label(QueueEntryStatus::kOpen), limit, offset}));
}

core::Result<int64_t> QueueEntryTable::CountOpenOf(store::Transaction& tx,
                                                   const std::string& person_id) {
  return Count(
      tx.QueryOne("SELECT COUNT(*) AS n FROM queue_entries WHERE person_id = ? AND status = ?",
                  {person_id, Label(QueueEntryStatus::kOpen)}));
}

core::Result<std::vector<QueueEntryRow>> QueueEntryTable::ListOpenWithKey(
    store::Transaction& tx, const std::string& person_id, const std::string& key_id) {
  return Many(
      tx.Query(Select("q.ssh_key_id = ? AND q.person_id = ? AND q.status = ? ORDER BY q.name"),
               {key_id, person_id, Label(QueueEntryStatus::kOpen)}));
}

core::Result<std::vector<QueueEntryRow>> QueueEntryTable::ListOf(store::Transaction& tx,
                                                                 const std::string& person_id,
                                                                 int64_t limit, int64_t offset) {
  return Many(tx.Query(Select("q.person_id = ? ORDER BY q.entered_at, q.id LIMIT ? OFFSET ?"),
                       {person_id, limit, offset}));
}

core::Result<int64_t> QueueEntryTable::CountOf(store::Transaction& tx,
                                               const std::string& person_id) {
  return Count(
      tx.QueryOne("SELECT COUNT(*) AS n FROM queue_entries WHERE person_id = ?", {person_id}));
}

core::Result<int64_t> QueueEntryTable::Position(store::Transaction& tx, const std::string& gpu_type,
                                                int64_t seq) {
  return Count(tx.QueryOne(
      "SELECT COUNT(*) AS n FROM queue_entries WHERE gpu_type = ? AND status = ? AND seq <= ?",
      {gpu_type, Label(QueueEntryStatus::kOpen), seq}));
}

core::Result<int64_t> QueueEntryTable::CountOpen(store::Transaction& tx,
                                                 const std::string& gpu_type) {
  return Count(
      tx.QueryOne("SELECT COUNT(*) AS n FROM queue_entries WHERE gpu_type = ? AND status = ?",
                  {gpu_type, Label(QueueEntryStatus::kOpen)}));
}

core::Result<bool> QueueEntryTable::HasOpen(store::Transaction& tx, const std::string& gpu_type) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT id FROM queue_entries WHERE gpu_type = ? AND status = ? LIMIT 1",
                  {gpu_type, Label(QueueEntryStatus::kOpen)}));
  return row.has_value();
}

core::Result<int64_t> QueueEntryTable::NextSeq(store::Transaction& tx,
                                               const std::string& gpu_type) {
  return Count(tx.QueryOne(
      "SELECT COALESCE(MAX(seq), 0) + 1 AS n FROM queue_entries WHERE gpu_type = ?", {gpu_type}));
}

core::Result<std::vector<DrainCandidate>> QueueEntryTable::OpenAfter(store::Transaction& tx,
                                                                     const std::string& gpu_type,
                                                                     int64_t after_seq,
                                                                     int64_t limit) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query("SELECT " + std::string(kColumns) +
                   " FROM queue_entries q WHERE q.gpu_type = ? AND q.status = ? AND q.seq > ? "
                   "ORDER BY q.seq LIMIT ?",
               {gpu_type, Label(QueueEntryStatus::kOpen), after_seq, limit}));
  std::vector<DrainCandidate> out;
  for (const auto& r : rows) {
    DrainCandidate c{RowOf(r), ""};
    // The owner's address from its owner (auth), not by joining its table.
    GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, c.entry.person_id));
    if (!email) continue;  // the owner is gone: nobody to launch for
    c.email = std::move(*email);
    out.push_back(std::move(c));
  }
  return out;
}

core::Result<std::vector<QueueEntryRow>> QueueEntryTable::ListOpenAll(store::Transaction& tx,
                                                                      const std::string& gpu_type,
                                                                      int64_t limit,
                                                                      int64_t offset) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query(Select("q.status = ? AND (? = '' OR q.gpu_type = ?) ORDER BY "
                                 "q.gpu_type, q.seq LIMIT ? OFFSET ?"),
                          {Label(QueueEntryStatus::kOpen), gpu_type, gpu_type, limit, offset}));
  std::vector<QueueEntryRow> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(RowOf(r));
  return out;
}

core::Result<int64_t> QueueEntryTable::CountOpenAll(store::Transaction& tx,
                                                    const std::string& gpu_type) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM queue_entries WHERE status = ? AND "
                            "(? = '' OR gpu_type = ?)",
                            {Label(QueueEntryStatus::kOpen), gpu_type, gpu_type}));
  return row ? row->Int("n") : 0;
}

core::Result<void> QueueEntryTable::Insert(store::Transaction& tx, const QueueEntryRow& row) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO queue_entries (id, person_id, gpu_type, seq, name, ssh_key_id, status, "
              "entered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
              {row.id, row.person_id, row.gpu_type, row.seq, row.name, row.ssh_key_id,
               Label(row.status), row.entered_at}));
  return {};
}

core::Result<void> QueueEntryTable::Cancel(store::Transaction& tx, const std::string& id,
                                           int64_t now) {
  GPUWERK_TRY(
      tx.Exec("UPDATE queue_entries SET status = ?, left_at = ? WHERE id = ? AND status = ?",
              {Label(QueueEntryStatus::kCancelled), now, id, Label(QueueEntryStatus::kOpen)}));
  return {};
}

core::Result<void> QueueEntryTable::SetLastFailure(store::Transaction& tx, const std::string& id,
                                                   const std::string& why) {
  GPUWERK_TRY(tx.Exec("UPDATE queue_entries SET last_failure = ? WHERE id = ?", {why, id}));
  return {};
}

core::Result<void> QueueEntryTable::MarkPassedOver(store::Transaction& tx, const std::string& id,
                                                   int64_t now, const std::string& why) {
  GPUWERK_TRY(tx.Exec("UPDATE queue_entries SET passed_over_at = ?, last_failure = ? WHERE id = ?",
                      {now, why, id}));
  return {};
}

core::Result<void> QueueEntryTable::EndPassOverStreak(store::Transaction& tx,
                                                      const std::string& id) {
  GPUWERK_TRY(tx.Exec("UPDATE queue_entries SET passed_over_at = NULL WHERE id = ?", {id}));
  return {};
}

core::Result<std::vector<QueueEntryRow>> QueueEntryTable::ListPassedOver(store::Transaction& tx) {
  // The literal 'open' lets the store use migration 18's partial index.
  return Many(tx.Query(
      Select("q.status = 'open' AND q.passed_over_at IS NOT NULL ORDER BY q.entered_at, q.id")));
}

core::Result<void> QueueEntryTable::MarkLaunched(store::Transaction& tx, const std::string& id,
                                                 const std::string& instance_id, int64_t now) {
  GPUWERK_TRY(tx.Exec(
      "UPDATE queue_entries SET status = ?, instance_id = ?, left_at = ?, "
      "launch_attempts = launch_attempts + 1, passed_over_at = NULL WHERE id = ? AND "
      "status = ?",
      {Label(QueueEntryStatus::kLaunched), instance_id, now, id, Label(QueueEntryStatus::kOpen)}));
  return {};
}

core::Result<int64_t> QueueEntryTable::Requeue(store::Transaction& tx,
                                               const std::string& instance_id,
                                               const std::string& why, int64_t max_attempts) {
  const std::string open = Label(QueueEntryStatus::kOpen);
  return tx.Exec(
      "UPDATE queue_entries SET status = ?, left_at = NULL, last_failure = ? WHERE instance_id = "
      "? AND status = ? AND launch_attempts < ? AND NOT EXISTS (SELECT 1 FROM queue_entries o "
      "WHERE o.person_id = queue_entries.person_id AND o.gpu_type = queue_entries.gpu_type AND "
      "o.status = ?)",
      {open, why, instance_id, Label(QueueEntryStatus::kLaunched), max_attempts, open});
}

core::Result<QueueEntry> QueueEntryView(store::Transaction& tx, const QueueEntryRow& row) {
  QueueEntry e{.id = row.id,
               .gpu_type = row.gpu_type,
               .name = row.name,
               .ssh_key_id = row.ssh_key_id,
               .status = row.status,
               .entered_at = row.entered_at,
               .left_at = row.left_at,
               .instance_id = row.instance_id,
               .last_failure = row.last_failure};
  GPUWERK_ASSIGN_OR_RETURN(auto key, keys::SshKeyTable::Find(tx, row.ssh_key_id));
  if (key) e.ssh_key_name = key->name;
  if (row.status == QueueEntryStatus::kOpen) {
    GPUWERK_ASSIGN_OR_RETURN(e.position, QueueEntryTable::Position(tx, row.gpu_type, row.seq));
  }
  return e;
}

}  // namespace gpuwerk::sched::internal
