#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "keys/ssh_key_registry.h"
#include "mail/outbox.h"
#include "sched/desired_state_notifier.h"
#include "sched/launch_gate.h"
#include "sched/page.h"
#include "sched/sched_options.h"
#include "sched/states.h"
#include "store/database.h"
#include "store/leader_fence.h"

namespace gpuwerk::sched {

/// A person's place in a GPU type's queue, with the name and key to launch with.
struct QueueEntry {
  std::string id;  ///< "qen_…"
  std::string gpu_type;
  std::string name;
  std::string ssh_key_id;
  std::string ssh_key_name;  ///< "" when the key row is gone
  QueueEntryStatus status = QueueEntryStatus::kOpen;
  int64_t position = 0;            ///< 1-based place among the type's open entries; 0 unless open
  int64_t entered_at = 0;          ///< Unix seconds
  std::optional<int64_t> left_at;  ///< Unix seconds: launched or cancelled; none while open
  std::string instance_id;         ///< the launched instance ("ins_…"); "" when none
  std::string last_failure;        ///< why the last launch failed or was passed over; "" when none
};

/// One row of a person's queue history: the wait and the outcome.
struct QueueHistoryRow {
  QueueEntry entry;
  int64_t wait_seconds = 0;  ///< left_at (or now while open) − entered_at, seconds
  std::string outcome;       ///< "launched", "cancelled" or "waiting"
};

/// One page of a person's open queue entries, oldest first.
using QueueEntryPage = Page<QueueEntry>;

/// An open queue entry with its owner, as an operator's list shows it.
struct OwnedQueueEntry {
  std::string person_id;
  std::string email;  ///< the owner's address; "" when the account is gone
  QueueEntry entry;
};

/// One page of everyone's open queue entries, by GPU type, then queue order.
using OwnedQueueEntryPage = Page<OwnedQueueEntry>;

/// One page of queue history, 15 rows, oldest entry first (a stable order: new entries only
/// ever land on the last page).
using QueueHistoryPage = Page<QueueHistoryRow>;

/// What one drain did.
struct DrainResult {
  std::vector<std::string> launched;     ///< queue entry ids, in launch order
  std::vector<std::string> passed_over;  ///< entries skipped because their owner cannot launch
};

/// The queue: one strictly FIFO queue per GPU type, drained into instances whenever
/// capacity may have freed. Thread-safe (state lives in the store); every change is audited.
///
/// Order: each entry takes the next `seq` of its GPU type when it joins and keeps it for life;
/// an entry put back after a failed launch keeps its old `seq`, so its old place. Drain walks
/// the open entries of a type by `seq` and launches, in one write transaction, each one whose
/// owner may launch (the LaunchGate, R-14: a payment method on their billing account) while
/// free hosts remain; an entry whose owner may not is passed over, keeps its place and is
/// launched ahead of later entries once its owner may. Its owner is mailed once per pass-over
/// streak: the streak (`passed_over_at` on the entry) ends when the entry launches or its owner
/// may launch again (EndPassOverStreaks, the drain). See docs/queue.md.
class QueueService {
 public:
  /// Whether a person may launch now: the same gate as a direct create's. Its refusal
  /// (IsLaunchRefusal) passes the entry over; its other errors fail the drain.
  using CanLaunch = LaunchGate;

  /// References must outlive the service. `outbox` stores the launch mails in the drain's
  /// transaction; `mail_wake` (optional) is called after a drain that enqueued mail commits;
  /// `notifier` (optional) is told about the hosts that got an instance; `can_launch`
  /// (optional; empty lets everyone) is called inside the drain's transaction.
  QueueService(store::Database& db, core::Clock& clock, core::Rng& rng, SchedOptions options,
               mail::Outbox& outbox, std::function<void()> mail_wake = {},
               DesiredStateNotifier* notifier = nullptr, CanLaunch can_launch = {});

  /// Work done inside a join's write transaction, after the entry is written.
  using InTransaction = std::function<core::Result<void>(store::Transaction&, const QueueEntry&)>;

  /// Enters the queue of `gpu_type` with the name and key to launch with, then drains that type
  /// (so an entry that finds a free host is launched at once; the returned entry is then
  /// `launched` with its instance id). A type with no host online is joined all the same.
  /// Errors: invalid_name (not a DNS label); not_found (no such key of this person);
  /// kInvalidArgument unknown_gpu_type; kAlreadyExists already_queued (an open entry for this
  /// type; details: queue_entry_id); kAlreadyExists name_taken (a live instance or an open
  /// entry has the name, R-6); errors of `in_tx`; the store's.
  core::Result<QueueEntry> Join(const std::string& person_id, std::string_view gpu_type,
                                std::string_view name, std::string_view ssh_key_id,
                                const std::string& source_address, const InTransaction& in_tx = {});
  /// Leaves the queue: the open entry (by id, or by name) becomes `cancelled` now. Free.
  /// Errors: not_found (also another person's entry, or one no longer open).
  core::Result<QueueEntry> Leave(const std::string& person_id, std::string_view id_or_name,
                                 const std::string& source_address);
  /// The person's open entries with their positions, oldest first, 15 a page (1-based; one
  /// entry per GPU type at most, so seldom more than one page). Errors: invalid_page.
  core::Result<QueueEntryPage> List(const std::string& person_id, int page);
  /// The person's queue history, 15 a page (1-based). Errors: invalid_page.
  core::Result<QueueHistoryPage> History(const std::string& person_id, int page);
  /// Everyone's open entries (of `gpu_type` when not ""), by GPU type, then queue order, each
  /// with its position and owner: an operator's view. 15 a page. Errors: invalid_page; the
  /// store's.
  core::Result<OwnedQueueEntryPage> ListAllOpen(const std::string& gpu_type, int page);
  /// Launches queued entries of `gpu_type` onto free slots, oldest eligible first, in one write
  /// transaction (instance, placement, billing session, entry `launched`, owner's mail, audit),
  /// then wakes the hosts' agents and the mail worker. Returns what it did; a type with no
  /// open entries costs one read. Walks the queue a batch at a time and stops when no slot is
  /// left, so a decision costs O(log n) in the queue's length plus the entries passed over.
  ///
  /// `freed_hosts` empty: every free slot of the type is found (one pass over the hosts). Not
  /// empty: only the slots holding those hosts are considered (point lookups): what an agent
  /// sync that left its host free asks (AgentSync::CapacityFreed). Any other slot has an event
  /// of its own, and DrainAll (the periodic worker) looks at every slot.
  /// Errors: unknown_gpu_type; the store's.
  core::Result<DrainResult> Drain(const std::string& gpu_type,
                                  const std::vector<std::string>& freed_hosts = {});
  /// Drain() for every GPU type (the periodic worker). Errors: the first failure's.
  core::Result<DrainResult> DrainAll();
  /// Ends the pass-over streak of every open entry whose owner may launch now (a payment method
  /// was recorded: app/ calls this, then DrainAll), so that the next pass-over of such an entry
  /// mails its owner again. One write transaction over the passed-over entries only. Returns
  /// how many streaks ended. Errors: the gate's other than its refusal; the store's.
  core::Result<int64_t> EndPassOverStreaks();

  /// Makes dispatch leader-only (docs/scale-out.md "Leader-only work"): with `fence` set, Drain
  /// does nothing (an empty result, no store access) while the fence is not Holding(), and checks
  /// it first in its write transaction (which a replica that lost the lease meanwhile sees fail
  /// with not_leader and roll back). So one replica at a time launches queue entries, and the
  /// queue stays FIFO per GPU type across replicas; a join on another replica is
  /// launched by the leader's next drain. Null (the default, and on SQLite): every Drain runs.
  /// `fence` must outlive the service. Call before the service is shared between threads.
  void SetLeaderFence(const store::LeaderFence* fence) { fence_ = fence; }

 private:
  /// What a committed drain must announce.
  struct DrainEffects {
    std::vector<std::string> woken_hosts;  ///< hosts that got an instance
    bool mailed = false;                   ///< mail was enqueued
  };
  /// The node-0 host name of the first free slot of `gpu_type` (among `freed_hosts`' slots when
  /// not empty), in a read transaction; nullopt when the type has no open entry or no free slot.
  core::Result<std::optional<std::string>> FirstFreeSlot(
      const std::string& gpu_type, const std::vector<std::string>& freed_hosts, int64_t now);
  /// The drain's write transaction: walks free slots from `first_slot` and open entries by seq
  /// and launches or passes over each entry until either runs out.
  core::Result<DrainResult> DrainInTransaction(store::Transaction& tx, const std::string& gpu_type,
                                               const std::vector<std::string>& freed_hosts,
                                               const std::string& first_slot, int64_t now,
                                               DrainEffects& effects);
  /// After the commit: wakes the hosts' agents and the mail worker, logs the launches.
  void Announce(const std::string& gpu_type, const DrainResult& result,
                const DrainEffects& effects);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  SchedOptions options_;
  mail::Outbox& outbox_;
  std::function<void()> mail_wake_;
  DesiredStateNotifier* notifier_;
  CanLaunch can_launch_;
  const store::LeaderFence* fence_ = nullptr;
};

/// keys::KeyClaimedAway (docs/ssh-keys.md "Proof of possession"): `former`, a key its owner never
/// proved, was claimed by `claimer_id`, who proved it. Cancels the former owner's open queue
/// entries that hold it (each becomes `cancelled` now, audited `queue.cancel` with reason
/// `ssh_key_claimed` and the claimer as actor) and mails the former owner once, naming them.
/// Returns {"cancelled_queue_entries": [ids]}. Inside the claim's transaction `tx`. Errors: the
/// store's.
core::Result<nlohmann::json> CancelEntriesHoldingAClaimedKey(store::Transaction& tx,
                                                             core::Clock& clock, core::Rng& rng,
                                                             mail::Outbox& outbox,
                                                             const keys::SshKey& former,
                                                             const std::string& claimer_id);

}  // namespace gpuwerk::sched
