#pragma once

// The `queue_entries` table (migration 4, R-11, docs/queue.md). Not for use outside src/sched/.

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/queue_service.h"
#include "sched/states.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// One row of `queue_entries` as stored.
struct QueueEntryRow {
  std::string id;  ///< "qen_…"
  std::string person_id;
  std::string gpu_type;
  int64_t seq = 0;  ///< its place in the type's queue, kept for life
  std::string name;
  std::string ssh_key_id;
  QueueEntryStatus status = QueueEntryStatus::kOpen;
  int64_t entered_at = 0;          ///< Unix seconds
  std::optional<int64_t> left_at;  ///< Unix seconds
  std::string instance_id;         ///< "" when none
  std::string last_failure;
  int64_t launch_attempts = 0;
  /// When the current pass-over streak began (Unix seconds): set when a drain passes the entry
  /// over and its owner is mailed, cleared when it launches or its owner may launch again;
  /// nullopt outside a streak.
  std::optional<int64_t> passed_over_at;
};

/// An open entry a drain considers, with its owner's email address.
struct DrainCandidate {
  QueueEntryRow entry;
  std::string email;
};

/// The `queue_entries` table's SQL, inside the caller's transaction; errors are the store's.
class QueueEntryTable {
 public:
  QueueEntryTable() = delete;

  static core::Result<std::optional<QueueEntryRow>> Find(store::Transaction& tx,
                                                         const std::string& id);
  /// Entry `id` of `person_id` that is no longer open; nullopt otherwise.
  static core::Result<std::optional<QueueEntryRow>> FindLeft(store::Transaction& tx,
                                                             const std::string& person_id,
                                                             const std::string& id);
  /// `person_id`'s open entry for `gpu_type`; nullopt when none.
  static core::Result<std::optional<QueueEntryRow>> FindOpen(store::Transaction& tx,
                                                             const std::string& person_id,
                                                             const std::string& gpu_type);
  /// `person_id`'s open entry named `name`, other than `except_id`; nullopt when none.
  static core::Result<std::optional<QueueEntryRow>> FindOpenByName(store::Transaction& tx,
                                                                   const std::string& person_id,
                                                                   const std::string& name,
                                                                   const std::string& except_id);
  /// `person_id`'s open entry whose id or name is `id_or_name` (the oldest); nullopt when none.
  static core::Result<std::optional<QueueEntryRow>> FindOpenByIdOrName(
      store::Transaction& tx, const std::string& person_id, const std::string& id_or_name);
  /// `person_id`'s open entries, oldest first.
  static core::Result<std::vector<QueueEntryRow>> ListOpenOf(store::Transaction& tx,
                                                             const std::string& person_id);
  /// `person_id`'s open entries, oldest first: `limit` from `offset` on.
  static core::Result<std::vector<QueueEntryRow>> ListOpenOf(store::Transaction& tx,
                                                             const std::string& person_id,
                                                             int64_t limit, int64_t offset);
  /// How many open entries `person_id` has.
  static core::Result<int64_t> CountOpenOf(store::Transaction& tx, const std::string& person_id);
  /// `person_id`'s open entries holding SSH key `key_id`, by name.
  static core::Result<std::vector<QueueEntryRow>> ListOpenWithKey(store::Transaction& tx,
                                                                  const std::string& person_id,
                                                                  const std::string& key_id);
  /// Every entry of `person_id`, oldest first: `limit` from `offset` on.
  static core::Result<std::vector<QueueEntryRow>> ListOf(store::Transaction& tx,
                                                         const std::string& person_id,
                                                         int64_t limit, int64_t offset);
  /// How many entries `person_id` ever had.
  static core::Result<int64_t> CountOf(store::Transaction& tx, const std::string& person_id);
  /// The 1-based place of the open entry with `seq` among `gpu_type`'s open entries.
  static core::Result<int64_t> Position(store::Transaction& tx, const std::string& gpu_type,
                                        int64_t seq);
  /// How many open entries `gpu_type` has.
  static core::Result<int64_t> CountOpen(store::Transaction& tx, const std::string& gpu_type);
  /// Whether `gpu_type` has an open entry (one index probe).
  static core::Result<bool> HasOpen(store::Transaction& tx, const std::string& gpu_type);
  /// The next `seq` of `gpu_type`.
  static core::Result<int64_t> NextSeq(store::Transaction& tx, const std::string& gpu_type);
  /// Open entries of `gpu_type` after `after_seq`, by seq, at most `limit`, with their owners'
  /// email addresses (through the (gpu_type, status, seq) index; the addresses from
  /// auth::PersonTable::Email).
  static core::Result<std::vector<DrainCandidate>> OpenAfter(store::Transaction& tx,
                                                             const std::string& gpu_type,
                                                             int64_t after_seq, int64_t limit);

  /// Everyone's open entries (of `gpu_type` when not ""), by GPU type, then seq (queue order):
  /// `limit` from `offset` on.
  static core::Result<std::vector<QueueEntryRow>> ListOpenAll(store::Transaction& tx,
                                                              const std::string& gpu_type,
                                                              int64_t limit, int64_t offset);
  /// How many open entries there are (of `gpu_type` when not "").
  static core::Result<int64_t> CountOpenAll(store::Transaction& tx, const std::string& gpu_type);

  static core::Result<void> Insert(store::Transaction& tx, const QueueEntryRow& row);
  /// The open entry `id` becomes `cancelled` at `now`.
  static core::Result<void> Cancel(store::Transaction& tx, const std::string& id, int64_t now);
  static core::Result<void> SetLastFailure(store::Transaction& tx, const std::string& id,
                                           const std::string& why);
  /// Passed over at `now` (its owner is told once), with `why` as its last failure.
  static core::Result<void> MarkPassedOver(store::Transaction& tx, const std::string& id,
                                           int64_t now, const std::string& why);
  /// Ends entry `id`'s pass-over streak (`passed_over_at` cleared).
  static core::Result<void> EndPassOverStreak(store::Transaction& tx, const std::string& id);
  /// Every open entry in a pass-over streak, oldest first.
  static core::Result<std::vector<QueueEntryRow>> ListPassedOver(store::Transaction& tx);
  /// The open entry `id` becomes `launched` with `instance_id` at `now` (one more attempt).
  static core::Result<void> MarkLaunched(store::Transaction& tx, const std::string& id,
                                         const std::string& instance_id, int64_t now);
  /// The entry launched as `instance_id` goes back to `open` at its old place with `why`,
  /// unless it was launched `max_attempts` times or its owner has joined that queue again.
  /// Returns how many entries went back (0 or 1).
  static core::Result<int64_t> Requeue(store::Transaction& tx, const std::string& instance_id,
                                       const std::string& why, int64_t max_attempts);
};

/// The entry as QueueService shows it: its key's name (through keys) and, when open, its
/// position.
core::Result<QueueEntry> QueueEntryView(store::Transaction& tx, const QueueEntryRow& row);

}  // namespace gpuwerk::sched::internal
