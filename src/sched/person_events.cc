#include "sched/person_events.h"

#include <set>

#include "sched/internal/instance_rows.h"

namespace gpuwerk::sched {
namespace {

// The queue entry's columns and position, as QueueService shows them (queue_service.cc reads
// them the same way; keep the two in step).
constexpr const char* kEntryColumns =
    "q.id, q.gpu_type, q.name, q.ssh_key_id, k.name, q.status, q.entered_at, q.left_at, "
    "q.instance_id, q.last_failure, q.seq";
constexpr const char* kEntryFrom =
    " FROM queue_entries q LEFT JOIN ssh_keys k ON k.id = q.ssh_key_id ";

core::Result<QueueEntry> EntryFromRow(store::Transaction& tx, const store::Row& r) {
  QueueEntry e{.id = r.Text(0),
               .gpu_type = r.Text(1),
               .name = r.Text(2),
               .ssh_key_id = r.Text(3),
               .ssh_key_name = r.IsNull(4) ? std::string() : r.Text(4),
               .status = r.Text(5),
               .entered_at = r.Int(6),
               .left_at = r.OptInt(7),
               .instance_id = r.IsNull(8) ? std::string() : r.Text(8),
               .last_failure = r.Text(9)};
  if (e.status == "open") {
    GPUWERK_ASSIGN_OR_RETURN(auto pos,
                             tx.QueryOne("SELECT COUNT(*) FROM queue_entries WHERE gpu_type = ? "
                                         "AND status = 'open' AND seq <= ?",
                                         {e.gpu_type, r.Int(10)}));
    e.position = pos->Int(0);
  }
  return e;
}

}  // namespace

core::Result<PersonState> PersonStateReader::Read(const std::string& person_id,
                                                  const std::vector<std::string>& instance_ids,
                                                  const std::vector<std::string>& entry_ids) {
  const int64_t now = clock_.NowUnix();
  const int64_t unknown_after = options_.host_unknown_after_seconds;
  return db_.Read([&](store::Transaction& tx) -> core::Result<PersonState> {
    PersonState out;
    std::set<std::string> live;
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, tx.Query("SELECT id FROM instances WHERE person_id = ? AND deleted_at IS NULL "
                            "ORDER BY created_at, id",
                            {person_id}));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(auto in, internal::LoadInstance(tx, r.Text(0), now, unknown_after));
      if (!in) continue;
      live.insert(in->id);
      out.instances.push_back(std::move(*in));
    }
    for (const auto& id : instance_ids) {
      if (live.contains(id)) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto mine, tx.QueryOne("SELECT id FROM instances WHERE id = ? AND "
                                                      "person_id = ? AND deleted_at IS NOT NULL",
                                                      {id, person_id}));
      if (!mine) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto in, internal::LoadInstance(tx, id, now, unknown_after));
      if (in) out.ended_instances.push_back(std::move(*in));
    }

    std::set<std::string> open;
    GPUWERK_ASSIGN_OR_RETURN(auto entries,
                             tx.Query(std::string("SELECT ") + kEntryColumns + kEntryFrom +
                                          "WHERE q.person_id = ? AND q.status = 'open' "
                                          "ORDER BY q.entered_at, q.id",
                                      {person_id}));
    for (const auto& r : entries) {
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, EntryFromRow(tx, r));
      open.insert(e.id);
      out.queue_entries.push_back(std::move(e));
    }
    for (const auto& id : entry_ids) {
      if (open.contains(id)) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto row,
                               tx.QueryOne(std::string("SELECT ") + kEntryColumns + kEntryFrom +
                                               "WHERE q.id = ? AND q.person_id = ? AND "
                                               "q.status <> 'open'",
                                           {id, person_id}));
      if (!row) continue;
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, EntryFromRow(tx, *row));
      out.left_entries.push_back(std::move(e));
    }
    return out;
  });
}

}  // namespace gpuwerk::sched
