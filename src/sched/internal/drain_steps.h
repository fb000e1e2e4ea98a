#pragma once

// The named steps of QueueService::Drain (R-11, docs/queue.md), each usable and testable alone.
// Not for use outside src/sched/.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "sched/internal/host_table.h"
#include "sched/internal/queue_entry_table.h"
#include "sched/sched_options.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// Open entries (and free slots) a drain reads at a time.
inline constexpr int64_t kDrainBatch = 16;

/// The free slots of one GPU type, fetched a batch at a time by node-0 host name from
/// `from_name` on, each batch after the last slot of the one before; or, when `freed_hosts` is
/// not empty, only the slots holding those hosts (HostTable::SlotsOf).
class SlotCursor {
 public:
  SlotCursor(store::Transaction& tx, std::string gpu_type, int64_t hosts_per_instance, int64_t now,
             int64_t unknown_after, std::string from_name,
             std::vector<std::string> freed_hosts = {});
  /// The slot to use next; nullptr when none is left. Errors: the store's.
  core::Result<const Slot*> Current();
  /// The current slot was used: the next call to Current() moves on.
  void Take() { ++next_; }

 private:
  store::Transaction& tx_;
  std::string gpu_type_;
  int64_t hosts_per_instance_;
  int64_t now_;
  int64_t unknown_after_;
  std::string from_name_;
  std::vector<std::string> freed_hosts_;
  std::vector<Slot> slots_;
  size_t next_ = 0;
  bool fetched_ = false;
  bool exhausted_ = false;
};

/// The open entries of one GPU type in seq order, a batch at a time through the
/// (gpu_type, status, seq) index: a decision costs O(log n) plus the entries passed over at the
/// head, never a read of the whole queue.
class EntryCursor {
 public:
  EntryCursor(store::Transaction& tx, std::string gpu_type)
      : tx_(tx), gpu_type_(std::move(gpu_type)) {}
  /// The next open entry; nullptr at the end. Errors: the store's.
  core::Result<const DrainCandidate*> Next();

 private:
  store::Transaction& tx_;
  std::string gpu_type_;
  std::vector<DrainCandidate> batch_;
  size_t next_ = 0;
  int64_t after_seq_ = 0;
  bool exhausted_ = false;
};

/// What a drain step works with: one write transaction of one GPU type's drain.
struct DrainContext {
  store::Transaction& tx;
  core::Clock& clock;
  core::Rng& rng;
  const SchedOptions& options;
  mail::Outbox& outbox;
  std::string gpu_type;
  int64_t now = 0;  ///< Unix seconds
};

/// `c`'s owner may not launch now (`why`: the launch gate's refusal, which says what
/// to do): the entry keeps its place; the first time in a streak (no `passed_over_at` yet) it
/// is marked, its owner mailed and the pass audited. True when a mail was enqueued. Errors: the
/// store's.
core::Result<bool> PassOver(DrainContext& ctx, const DrainCandidate& c, std::string_view why);

/// An entry put back after a failed launch: its failed instance (no hosts, session ended)
/// still holds the name; it is finally deleted so the new launch can take the name.
core::Result<void> RetireFailedLaunch(DrainContext& ctx, const QueueEntryRow& entry);

/// A queue launch done.
struct QueueLaunch {
  std::string instance_id;
  std::vector<std::string> host_names;  ///< the hosts to wake
};

/// Launches entry `c` onto `slot`: the instance (InsertInstance), the entry `launched`, its
/// owner's mail and the `queue.launch` audit event. nullopt when the entry cannot launch now
/// and keeps its place with the reason recorded (its name is taken, its SSH key is gone).
/// Errors: the store's (a conflict: the slot was taken meanwhile).
core::Result<std::optional<QueueLaunch>> LaunchEntry(DrainContext& ctx, const DrainCandidate& c,
                                                     const Slot& slot);

}  // namespace gpuwerk::sched::internal
