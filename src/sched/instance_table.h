#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/keyset.h"
#include "sched/states.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// One row of the `instances` table (migration 2) as stored; the status here is the stored one,
/// not the one derived from observations (see InstanceService).
struct InstanceRow {
  std::string id;  ///< "ins_…"
  std::string person_id;
  std::string name;
  std::string ssh_key_id;
  std::string public_key;  ///< the key's line, copied at create (authorized_keys)
  std::string gpu_type;
  std::string hostname;  ///< globally unique
  std::string image;
  DesiredState desired = DesiredState::kRunning;
  int64_t restart_generation = 0;
  InstanceStatus status = InstanceStatus::kProvisioning;
  std::string status_reason;
  int64_t created_at = 0;             ///< Unix seconds
  std::optional<int64_t> deleted_at;  ///< Unix seconds; set once finally deleted
  std::string billing_session_id;
  /// The last change made to its container outside gpuwerk (migration 11, docs/instances.md
  /// "Changes outside gpuwerk"): its kind ("stopped", "restarted", "paused", "removed",
  /// "changed"; "" when none ever was), the sentence shown, when the server heard of it, and how
  /// many there were.
  std::string drift_kind;
  std::string drift_reason;
  std::optional<int64_t> drift_at;
  int64_t drift_count = 0;
  /// Whether the status reason shows `drift_reason` (until the owner restarts the instance).
  bool drift_in_status = false;
  /// When its owner was last mailed about drift; nullopt: never.
  std::optional<int64_t> drift_mailed_at;
};

/// Which instances InstanceTable::PageAll lists (an operator's view of everyone's): each
/// non-empty field must match.
struct InstanceFilter {
  bool include_deleted = false;  ///< false: live instances only
  std::string status;            ///< the stored status (InstanceStatus's text), e.g. "running"
  std::string host;              ///< a host's name: instances with a node placed on it now
};

/// The `instances` table: the one place that holds its SQL. Every function works inside the
/// caller's transaction; errors are the store's. "Live" means not finally deleted
/// (`deleted_at` unset). Stateless.
class InstanceTable {
 public:
  InstanceTable() = delete;

  /// Instance `id` of anyone, live or not; nullopt when absent.
  static core::Result<std::optional<InstanceRow>> Find(store::Transaction& tx,
                                                       const std::string& id);
  /// Instance `id` when it is `person_id`'s, live or not; nullopt otherwise.
  static core::Result<std::optional<InstanceRow>> FindOwned(store::Transaction& tx,
                                                            const std::string& person_id,
                                                            const std::string& id);
  /// `person_id`'s live instance whose id or name is `id_or_name` (the oldest when both
  /// match); nullopt when none.
  static core::Result<std::optional<InstanceRow>> FindLive(store::Transaction& tx,
                                                           const std::string& person_id,
                                                           const std::string& id_or_name);
  /// `person_id`'s live instance named `name`; nullopt when none.
  static core::Result<std::optional<InstanceRow>> FindLiveByName(store::Transaction& tx,
                                                                 const std::string& person_id,
                                                                 const std::string& name);
  /// The instance (live or not) whose hostname is `hostname`; nullopt when none. Hostnames are
  /// globally unique and never reused.
  static core::Result<std::optional<InstanceRow>> FindByHostname(store::Transaction& tx,
                                                                 const std::string& hostname);
  /// `person_id`'s live instances, oldest first (created_at, id): `limit` from `offset` on;
  /// `limit` < 0 means all.
  static core::Result<std::vector<InstanceRow>> ListLive(store::Transaction& tx,
                                                         const std::string& person_id,
                                                         int64_t limit = -1, int64_t offset = 0);
  /// How many live instances `person_id` has.
  static core::Result<int64_t> CountLive(store::Transaction& tx, const std::string& person_id);
  /// How many live instances of `gpu_type` exist.
  static core::Result<int64_t> CountLiveOfType(store::Transaction& tx, const std::string& gpu_type);
  /// `person_id`'s live instances holding SSH key `key_id`, by name.
  static core::Result<std::vector<InstanceRow>> ListLiveWithKey(store::Transaction& tx,
                                                                const std::string& person_id,
                                                                const std::string& key_id);
  /// Live instances (of anyone) with desired `running` that hold one of the SSH keys `key_ids`.
  static core::Result<std::vector<InstanceRow>> ListRunningWithKeys(
      store::Transaction& tx, const std::vector<std::string>& key_ids);

  /// Everyone's instances matching `filter`, newest first (created_at, id descending), keyset
  /// paged by `query` (core/keyset.h): older than `before`, else the `limit` nearest newer than
  /// `after` (still answered newest first), else the newest `limit`.
  static core::Result<std::vector<InstanceRow>> PageAll(store::Transaction& tx,
                                                        const InstanceFilter& filter,
                                                        const core::KeysetQuery& query,
                                                        int64_t limit);
  /// How many instances match `filter`; with `newer_than`, only those newer than that key.
  static core::Result<int64_t> CountAll(store::Transaction& tx, const InstanceFilter& filter,
                                        const std::optional<core::KeysetKey>& newer_than = {});

  /// Stores a new instance.
  static core::Result<void> Insert(store::Transaction& tx, const InstanceRow& row);
  /// Records a change made to its container outside gpuwerk at `now`: kind, reason, drift_at,
  /// drift_count + 1, shown in the status reason again.
  static core::Result<void> RecordDrift(store::Transaction& tx, const std::string& id,
                                        const std::string& kind, const std::string& reason,
                                        int64_t now);
  /// Its owner was mailed about drift at `now`.
  static core::Result<void> MarkDriftMailed(store::Transaction& tx, const std::string& id,
                                            int64_t now);
  /// restart_generation + 1, status `restarting`, no reason (drift no longer in it either).
  static core::Result<void> BumpRestart(store::Transaction& tx, const std::string& id);
  /// desired `deleted`, status `deleting`, no reason.
  static core::Result<void> MarkDeleting(store::Transaction& tx, const std::string& id);
  /// Stores `status` and `reason` when either differs from what is stored.
  static core::Result<void> SetStatus(store::Transaction& tx, const std::string& id,
                                      InstanceStatus status, const std::string& reason);
  /// Finally deleted at `now`: deleted_at set, status `deleted`, no reason.
  static core::Result<void> MarkFinallyDeleted(store::Transaction& tx, const std::string& id,
                                               int64_t now);
  /// A live `failed` instance becomes finally deleted at `now` (desired and status `deleted`):
  /// what a queue entry put back after a failed launch does with its old instance. Callers
  /// make sure it holds no placements.
  static core::Result<void> RetireFailed(store::Transaction& tx, const std::string& id,
                                         int64_t now);
  /// Stores `unknown` ("host not heard from") for live instance `id` with desired `running`
  /// whose status is neither `failed` nor `unknown`. True when it changed.
  static core::Result<bool> MarkUnknown(store::Transaction& tx, const std::string& id);
};

}  // namespace gpuwerk::sched
