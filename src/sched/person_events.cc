#include "sched/person_events.h"

#include <set>

#include "sched/instance_table.h"
#include "sched/internal/instance_rows.h"
#include "sched/internal/queue_entry_table.h"

namespace gpuwerk::sched {

using internal::QueueEntryTable;

core::Result<PersonState> PersonStateReader::Read(const std::string& person_id,
                                                  const std::vector<std::string>& instance_ids,
                                                  const std::vector<std::string>& entry_ids) {
  const int64_t now = clock_.NowUnix();
  const int64_t unknown_after = options_.host_unknown_after_seconds;
  return db_.Read([&](store::Transaction& tx) -> core::Result<PersonState> {
    PersonState out;
    std::set<std::string> live;
    GPUWERK_ASSIGN_OR_RETURN(auto rows, InstanceTable::ListLive(tx, person_id));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(auto in, internal::LoadInstance(tx, r.id, now, unknown_after));
      if (!in) continue;
      live.insert(in->id);
      out.instances.push_back(std::move(*in));
    }
    for (const auto& id : instance_ids) {
      if (live.contains(id)) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto mine, InstanceTable::FindOwned(tx, person_id, id));
      if (!mine || !mine->deleted_at) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto in, internal::LoadInstance(tx, id, now, unknown_after));
      if (in) out.ended_instances.push_back(std::move(*in));
    }

    std::set<std::string> open;
    GPUWERK_ASSIGN_OR_RETURN(auto entries, QueueEntryTable::ListOpenOf(tx, person_id));
    for (const auto& r : entries) {
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, internal::QueueEntryView(tx, r));
      open.insert(e.id);
      out.queue_entries.push_back(std::move(e));
    }
    for (const auto& id : entry_ids) {
      if (open.contains(id)) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto row, QueueEntryTable::FindLeft(tx, person_id, id));
      if (!row) continue;
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, internal::QueueEntryView(tx, *row));
      out.left_entries.push_back(std::move(e));
    }
    return out;
  });
}

}  // namespace gpuwerk::sched
