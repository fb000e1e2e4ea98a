#include "sched/queue_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "audit/audit_log.h"
#include "auth/person_table.h"
#include "core/fault_point.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/internal/drain_steps.h"
#include "sched/internal/gpu_type_table.h"
#include "sched/internal/launch.h"
#include "sched/internal/queue_entry_table.h"
#include "sched/queue_mails.h"

namespace gpuwerk::sched {
namespace {

using internal::QueueEntryTable;

core::Result<std::optional<QueueEntry>> LoadEntry(store::Transaction& tx, const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, QueueEntryTable::Find(tx, id));
  if (!row) return std::optional<QueueEntry>();
  GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, internal::QueueEntryView(tx, *row));
  return std::optional<QueueEntry>(std::move(e));
}

}  // namespace

QueueService::QueueService(store::Database& db, core::Clock& clock, core::Rng& rng,
                           SchedOptions options, mail::Outbox& outbox,
                           std::function<void()> mail_wake, DesiredStateNotifier* notifier,
                           CanLaunch can_launch)
    : db_(db),
      clock_(clock),
      rng_(rng),
      options_(std::move(options)),
      outbox_(outbox),
      mail_wake_(std::move(mail_wake)),
      notifier_(notifier),
      can_launch_(std::move(can_launch)) {}

core::Result<QueueEntry> QueueService::Join(const std::string& person_id, std::string_view gpu_type,
                                            std::string_view name, std::string_view ssh_key_id,
                                            const std::string& source_address,
                                            const InTransaction& in_tx) {
  GPUWERK_TRY(ValidateDnsLabel(name, "An instance name"));
  const std::string type(gpu_type), entry_name(name), key_id(ssh_key_id);
  const int64_t now = clock_.NowUnix();
  core::Result<QueueEntry> joined;
  // Two joins that drew the same seq (PostgreSQL, or a lost race) conflict on UNIQUE(gpu_type,
  // seq); the loser draws again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    joined = db_.Write([&](store::Transaction& tx) -> core::Result<QueueEntry> {
      GPUWERK_TRY(internal::OwnKeyLine(tx, person_id, key_id));
      GPUWERK_TRY(internal::LoadType(tx, type));
      GPUWERK_ASSIGN_OR_RETURN(auto open, QueueEntryTable::FindOpen(tx, person_id, type));
      if (open) {
        return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "already_queued",
                                      "You are already in the " + type +
                                          " queue; leave it first to change your entry.")
                              .WithDetail("queue_entry_id", open->id));
      }
      GPUWERK_TRY(internal::CheckNameFree(tx, person_id, entry_name));
      GPUWERK_ASSIGN_OR_RETURN(const int64_t seq, QueueEntryTable::NextSeq(tx, type));
      const std::string id = core::NewId(rng_, "qen");
      GPUWERK_TRY(QueueEntryTable::Insert(tx, {.id = id,
                                               .person_id = person_id,
                                               .gpu_type = type,
                                               .seq = seq,
                                               .name = entry_name,
                                               .ssh_key_id = key_id,
                                               .status = QueueEntryStatus::kOpen,
                                               .entered_at = now}));
      GPUWERK_TRY(audit::RecordAudit(
          tx, clock_, rng_,
          {.actor_id = person_id,
           .action = "queue.join",
           .target = id,
           .source_address = source_address,
           .detail = {{"gpu_type", type}, {"name", entry_name}, {"ssh_key_id", key_id}}}));
      GPUWERK_ASSIGN_OR_RETURN(auto entry, LoadEntry(tx, id));
      if (in_tx) GPUWERK_TRY(in_tx(tx, *entry));
      return std::move(*entry);
    });
    // A lost race (the queue seq taken by a concurrent join) is a store constraint violation.
    if (joined || !store::IsConstraintViolation(joined.error())) break;
  }
  if (!joined) return joined;
  auto drained = Drain(type);
  if (!drained) spdlog::warn("sched: drain after a join failed: {}", drained.error().message);
  if (!drained || drained->launched.empty()) return joined;
  // Launched at once: answer the entry as it is now.
  auto now_entry = db_.Read([&](store::Transaction& tx) { return LoadEntry(tx, joined->id); });
  if (now_entry && *now_entry) return std::move(**now_entry);
  return joined;
}

core::Result<QueueEntry> QueueService::Leave(const std::string& person_id,
                                             std::string_view id_or_name,
                                             const std::string& source_address) {
  const std::string key(id_or_name);
  const int64_t now = clock_.NowUnix();
  return db_.Write([&](store::Transaction& tx) -> core::Result<QueueEntry> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, QueueEntryTable::FindOpenByIdOrName(tx, person_id, key));
    if (!row) return core::NotFound("Queue entry");
    const std::string id = row->id;
    GPUWERK_TRY(QueueEntryTable::Cancel(tx, id, now));
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = person_id,
                                    .action = "queue.leave",
                                    .target = id,
                                    .source_address = source_address,
                                    .detail = {{"gpu_type", row->gpu_type}, {"name", row->name}}}));
    GPUWERK_ASSIGN_OR_RETURN(auto entry, LoadEntry(tx, id));
    return std::move(*entry);
  });
}

core::Result<QueueEntryPage> QueueService::List(const std::string& person_id, int page) {
  GPUWERK_TRY(CheckPage(page));
  return db_.Read([&](store::Transaction& tx) -> core::Result<QueueEntryPage> {
    QueueEntryPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(out.total, QueueEntryTable::CountOpenOf(tx, person_id));
    out.pages = PageCount(out.total);
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, QueueEntryTable::ListOpenOf(tx, person_id, kPageSize, PageOffset(page)));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, internal::QueueEntryView(tx, r));
      out.items.push_back(std::move(e));
    }
    return out;
  });
}

core::Result<OwnedQueueEntryPage> QueueService::ListAllOpen(const std::string& gpu_type, int page) {
  GPUWERK_TRY(CheckPage(page));
  return db_.Read([&](store::Transaction& tx) -> core::Result<OwnedQueueEntryPage> {
    OwnedQueueEntryPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(out.total, QueueEntryTable::CountOpenAll(tx, gpu_type));
    out.pages = PageCount(out.total);
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, QueueEntryTable::ListOpenAll(tx, gpu_type, kPageSize, PageOffset(page)));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, internal::QueueEntryView(tx, r));
      GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, r.person_id));
      out.items.push_back(
          {.person_id = r.person_id, .email = email.value_or(""), .entry = std::move(e)});
    }
    return out;
  });
}

core::Result<QueueHistoryPage> QueueService::History(const std::string& person_id, int page) {
  GPUWERK_TRY(CheckPage(page));
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<QueueHistoryPage> {
    QueueHistoryPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(out.total, QueueEntryTable::CountOf(tx, person_id));
    out.pages = PageCount(out.total);
    GPUWERK_ASSIGN_OR_RETURN(auto rows,
                             QueueEntryTable::ListOf(tx, person_id, kPageSize, PageOffset(page)));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, internal::QueueEntryView(tx, r));
      QueueHistoryRow h;
      h.wait_seconds = std::max<int64_t>(0, e.left_at.value_or(now) - e.entered_at);
      h.outcome = r.status == QueueEntryStatus::kOpen ? "waiting" : std::string(ToString(r.status));
      h.entry = std::move(e);
      out.items.push_back(std::move(h));
    }
    return out;
  });
}

core::Result<std::optional<std::string>> QueueService::FirstFreeSlot(
    const std::string& gpu_type, const std::vector<std::string>& freed_hosts, int64_t now) {
  const int64_t unknown_after = options_.host_unknown_after_seconds;
  return db_.Read([&](store::Transaction& tx) -> core::Result<std::optional<std::string>> {
    GPUWERK_ASSIGN_OR_RETURN(bool waiting, QueueEntryTable::HasOpen(tx, gpu_type));
    if (!waiting) return std::optional<std::string>();
    GPUWERK_ASSIGN_OR_RETURN(GpuTypeConfig type, internal::LoadType(tx, gpu_type));
    std::vector<internal::Slot> free;
    if (freed_hosts.empty()) {
      GPUWERK_ASSIGN_OR_RETURN(
          free, internal::HostTable::FreeSlots(tx, gpu_type, type.hosts_per_instance, 1, now,
                                               unknown_after));
    } else {
      GPUWERK_ASSIGN_OR_RETURN(
          free, internal::HostTable::SlotsOf(tx, gpu_type, type.hosts_per_instance, freed_hosts,
                                             now, unknown_after));
    }
    if (free.empty()) return std::optional<std::string>();
    return std::optional<std::string>(free[0].name);
  });
}

core::Result<DrainResult> QueueService::DrainInTransaction(
    store::Transaction& tx, const std::string& gpu_type,
    const std::vector<std::string>& freed_hosts, const std::string& first_slot, int64_t now,
    DrainEffects& effects) {
  DrainResult out;
  GPUWERK_ASSIGN_OR_RETURN(GpuTypeConfig type, internal::LoadType(tx, gpu_type));
  internal::DrainContext ctx{.tx = tx,
                             .clock = clock_,
                             .rng = rng_,
                             .options = options_,
                             .outbox = outbox_,
                             .gpu_type = gpu_type,
                             .now = now};
  internal::SlotCursor slots(tx, gpu_type, type.hosts_per_instance, now,
                             options_.host_unknown_after_seconds, first_slot, freed_hosts);
  internal::EntryCursor entries(tx, gpu_type);
  for (;;) {
    GPUWERK_ASSIGN_OR_RETURN(const internal::Slot* slot, slots.Current());
    if (slot == nullptr) break;
    GPUWERK_ASSIGN_OR_RETURN(const internal::DrainCandidate* c, entries.Next());
    if (c == nullptr) break;
    if (can_launch_) {
      auto may = can_launch_(tx, c->entry.person_id, "launch");
      if (!may && !IsLaunchRefusal(may.error())) return std::unexpected(may.error());
      if (!may) {
        // passed over, keeps its place; its owner is told once per streak.
        out.passed_over.push_back(c->entry.id);
        GPUWERK_ASSIGN_OR_RETURN(bool mailed, internal::PassOver(ctx, *c, may.error().message));
        effects.mailed = effects.mailed || mailed;
        continue;
      }
    }
    // Its owner may launch: a pass-over streak ends (launched or not).
    if (c->entry.passed_over_at) {
      GPUWERK_TRY(QueueEntryTable::EndPassOverStreak(tx, c->entry.id));
    }
    GPUWERK_ASSIGN_OR_RETURN(auto launched, internal::LaunchEntry(ctx, *c, *slot));
    if (!launched) continue;  // kept its place, the reason recorded
    slots.Take();
    effects.woken_hosts.insert(effects.woken_hosts.end(), launched->host_names.begin(),
                               launched->host_names.end());
    effects.mailed = true;
    out.launched.push_back(c->entry.id);
  }
  return out;
}

core::Result<DrainResult> QueueService::Drain(const std::string& gpu_type,
                                              const std::vector<std::string>& freed_hosts) {
  // Dispatch is the leader's (docs/scale-out.md): another replica leaves it to the leader.
  if (fence_ != nullptr && !fence_->Holding()) return DrainResult{};
  const int64_t now = clock_.NowUnix();
  // Most calls find nothing to do: decide that without taking the write lock. The first free
  // slot found here (by host name) is where the write transaction's search starts: the hosts
  // before it were busy a moment ago, and one that frees since triggers a drain of its own (and
  // the periodic drain catches everything), so a decision passes over the hosts once, not twice.
  GPUWERK_ASSIGN_OR_RETURN(auto first_slot, FirstFreeSlot(gpu_type, freed_hosts, now));
  if (!first_slot) return DrainResult{};
  DrainEffects effects;
  auto result = db_.Write([&](store::Transaction& tx) -> core::Result<DrainResult> {
    effects = DrainEffects{};
    if (fence_ != nullptr) GPUWERK_TRY(fence_->Check(tx));
    return DrainInTransaction(tx, gpu_type, freed_hosts, *first_slot, now, effects);
  });
  if (!result) return result;
  core::FaultPoint("queue_drain_committed");
  Announce(gpu_type, *result, effects);
  return result;
}

void QueueService::Announce(const std::string& gpu_type, const DrainResult& result,
                            const DrainEffects& effects) {
  if (notifier_ != nullptr && !effects.woken_hosts.empty()) notifier_->Notify(effects.woken_hosts);
  if (effects.mailed && mail_wake_) mail_wake_();
  if (!result.launched.empty()) {
    spdlog::info("sched: launched {} queue entr{} of {}", result.launched.size(),
                 result.launched.size() == 1 ? "y" : "ies", gpu_type);
  }
}

core::Result<DrainResult> QueueService::DrainAll() {
  GPUWERK_ASSIGN_OR_RETURN(auto types, db_.Read([](store::Transaction& tx) {
    return internal::GpuTypeTable::List(tx);
  }));
  DrainResult all;
  for (const auto& t : types) {
    GPUWERK_ASSIGN_OR_RETURN(DrainResult one, Drain(t.name));
    all.launched.insert(all.launched.end(), one.launched.begin(), one.launched.end());
    all.passed_over.insert(all.passed_over.end(), one.passed_over.begin(), one.passed_over.end());
  }
  return all;
}

core::Result<int64_t> QueueService::EndPassOverStreaks() {
  return db_.Write([&](store::Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto passed_over, QueueEntryTable::ListPassedOver(tx));
    int64_t ended = 0;
    for (const auto& e : passed_over) {
      if (can_launch_) {
        auto may = can_launch_(tx, e.person_id, "launch");
        if (!may && !IsLaunchRefusal(may.error())) return std::unexpected(may.error());
        if (!may) continue;
      }
      GPUWERK_TRY(QueueEntryTable::EndPassOverStreak(tx, e.id));
      ++ended;
    }
    return ended;
  });
}

core::Result<nlohmann::json> CancelEntriesHoldingAClaimedKey(store::Transaction& tx,
                                                             core::Clock& clock, core::Rng& rng,
                                                             mail::Outbox& outbox,
                                                             const keys::SshKey& former,
                                                             const std::string& claimer_id) {
  GPUWERK_ASSIGN_OR_RETURN(keys::KeyUse use, KeyUsers(tx, former.person_id, former.id));
  nlohmann::json ids = nlohmann::json::array();
  std::vector<std::string> names;
  const int64_t now = clock.NowUnix();
  for (const auto& entry : use.queue_entries) {
    GPUWERK_TRY(QueueEntryTable::Cancel(tx, entry.id, now));
    GPUWERK_TRY(audit::RecordAudit(tx, clock, rng,
                                   {.actor_id = claimer_id,
                                    .action = "queue.cancel",
                                    .target = entry.id,
                                    .source_address = "",
                                    .detail = {{"gpu_type", entry.gpu_type},
                                               {"name", entry.name},
                                               {"reason", "ssh_key_claimed"},
                                               {"fingerprint", former.fingerprint}}}));
    ids.push_back(entry.id);
    names.push_back(entry.name + " (" + entry.gpu_type + ")");
  }
  GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, former.person_id));
  if (email) {
    GPUWERK_TRY(
        outbox.Enqueue(tx, KeyClaimedAwayMail(*email, former.name, former.fingerprint, names)));
  }
  return nlohmann::json{{"cancelled_queue_entries", std::move(ids)}};
}

}  // namespace gpuwerk::sched
