#include "sched/queue_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/fault_point.h"
#include "sched/host_registry.h"
#include "sched/internal/launch.h"
#include "sched/queue_mails.h"
#include "store/audit_log.h"

namespace gpuwerk::sched {
namespace {

constexpr int kPageSize = 15;
/// Open entries (and free slots) a drain reads at a time.
constexpr int64_t kDrainBatch = 16;

constexpr const char* kEntryColumns =
    "q.id, q.gpu_type, q.name, q.ssh_key_id, k.name, q.status, q.entered_at, q.left_at, "
    "q.instance_id, q.last_failure, q.seq";

/// An entry row selected with kEntryColumns, its position computed when it is open.
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

core::Result<std::optional<QueueEntry>> LoadEntry(store::Transaction& tx, const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           tx.QueryOne(std::string("SELECT ") + kEntryColumns +
                                           " FROM queue_entries q LEFT JOIN ssh_keys k ON k.id = "
                                           "q.ssh_key_id WHERE q.id = ?",
                                       {id}));
  if (!row) return std::optional<QueueEntry>();
  GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, EntryFromRow(tx, *row));
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
      can_launch_(can_launch ? std::move(can_launch) : [](const std::string&) { return true; }) {}

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
      GPUWERK_ASSIGN_OR_RETURN(auto key, tx.QueryOne("SELECT id FROM ssh_keys WHERE id = ? AND "
                                                     "person_id = ?",
                                                     {key_id, person_id}));
      if (!key) return core::NotFound("SSH key");
      GPUWERK_TRY(internal::LoadType(tx, type));
      GPUWERK_ASSIGN_OR_RETURN(auto open,
                               tx.QueryOne("SELECT id FROM queue_entries WHERE person_id = ? AND "
                                           "gpu_type = ? AND status = 'open'",
                                           {person_id, type}));
      if (open) {
        return core::Fail(core::Error(core::ErrorCode::kAlreadyExists, "already_queued",
                                      "You are already in the " + type +
                                          " queue; leave it first to change your entry.")
                              .WithDetail("queue_entry_id", open->Text(0)));
      }
      GPUWERK_TRY(internal::CheckNameFree(tx, person_id, entry_name));
      GPUWERK_ASSIGN_OR_RETURN(auto seq,
                               tx.QueryOne("SELECT COALESCE(MAX(seq), 0) + 1 FROM queue_entries "
                                           "WHERE gpu_type = ?",
                                           {type}));
      const std::string id = core::NewId(rng_, "qen");
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO queue_entries (id, person_id, gpu_type, seq, name, ssh_key_id, status, "
          "entered_at) VALUES (?, ?, ?, ?, ?, ?, 'open', ?)",
          {id, person_id, type, seq->Int(0), entry_name, key_id, now}));
      GPUWERK_TRY(store::RecordAudit(
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
    if (joined || joined.error().api_code != "constraint_violation") break;
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
    GPUWERK_ASSIGN_OR_RETURN(
        auto row, tx.QueryOne("SELECT id, gpu_type, name FROM queue_entries WHERE person_id = ? "
                              "AND status = 'open' AND (id = ? OR name = ?) ORDER BY seq LIMIT 1",
                              {person_id, key, key}));
    if (!row) return core::NotFound("Queue entry");
    const std::string id = row->Text(0);
    GPUWERK_TRY(
        tx.Exec("UPDATE queue_entries SET status = 'cancelled', left_at = ? WHERE id = ? AND "
                "status = 'open'",
                {now, id}));
    GPUWERK_TRY(
        store::RecordAudit(tx, clock_, rng_,
                           {.actor_id = person_id,
                            .action = "queue.leave",
                            .target = id,
                            .source_address = source_address,
                            .detail = {{"gpu_type", row->Text(1)}, {"name", row->Text(2)}}}));
    GPUWERK_ASSIGN_OR_RETURN(auto entry, LoadEntry(tx, id));
    return std::move(*entry);
  });
}

core::Result<std::vector<QueueEntry>> QueueService::List(const std::string& person_id) {
  return db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<QueueEntry>> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, tx.Query(std::string("SELECT ") + kEntryColumns +
                                " FROM queue_entries q LEFT JOIN ssh_keys k ON k.id = "
                                "q.ssh_key_id WHERE q.person_id = ? AND q.status = 'open' "
                                "ORDER BY q.entered_at, q.id",
                            {person_id}));
    std::vector<QueueEntry> out;
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, EntryFromRow(tx, r));
      out.push_back(std::move(e));
    }
    return out;
  });
}

core::Result<QueueHistoryPage> QueueService::History(const std::string& person_id, int page) {
  if (page < 1 || page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<QueueHistoryPage> {
    QueueHistoryPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(
        auto count,
        tx.QueryOne("SELECT COUNT(*) FROM queue_entries WHERE person_id = ?", {person_id}));
    out.total = count->Int(0);
    out.pages = std::max<int64_t>(1, (out.total + kPageSize - 1) / kPageSize);
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, tx.Query(std::string("SELECT ") + kEntryColumns +
                                " FROM queue_entries q LEFT JOIN ssh_keys k ON k.id = "
                                "q.ssh_key_id WHERE q.person_id = ? ORDER BY q.entered_at, q.id "
                                "LIMIT ? OFFSET ?",
                            {person_id, int64_t{kPageSize}, int64_t{(page - 1) * kPageSize}}));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(QueueEntry e, EntryFromRow(tx, r));
      QueueHistoryRow h;
      h.wait_seconds = std::max<int64_t>(0, e.left_at.value_or(now) - e.entered_at);
      h.outcome = e.status == "open" ? "waiting" : e.status;
      h.entry = std::move(e);
      out.items.push_back(std::move(h));
    }
    return out;
  });
}

core::Result<DrainResult> QueueService::Drain(const std::string& gpu_type,
                                              const std::vector<std::string>& freed_hosts) {
  const int64_t now = clock_.NowUnix();
  const int64_t unknown_after = options_.host_unknown_after_seconds;
  // Most calls find nothing to do: decide that without taking the write lock. The first free
  // slot found here (by host name) is where the write transaction's search starts: the hosts
  // before it were busy a moment ago, and one that frees since triggers a drain of its own (and
  // the periodic drain catches everything), so a decision passes over the hosts once, not twice.
  std::string first_slot;
  GPUWERK_ASSIGN_OR_RETURN(
      bool worth_it, db_.Read([&](store::Transaction& tx) -> core::Result<bool> {
        GPUWERK_ASSIGN_OR_RETURN(auto open,
                                 tx.QueryOne("SELECT id FROM queue_entries WHERE gpu_type = ? "
                                             "AND status = 'open' LIMIT 1",
                                             {gpu_type}));
        if (!open) return false;
        GPUWERK_ASSIGN_OR_RETURN(internal::TypeRow type, internal::LoadType(tx, gpu_type));
        std::vector<internal::Slot> free;
        if (freed_hosts.empty()) {
          GPUWERK_ASSIGN_OR_RETURN(free, internal::FreeSlots(tx, gpu_type, type.hosts_per_instance,
                                                             1, now, unknown_after));
        } else {
          GPUWERK_ASSIGN_OR_RETURN(free, internal::SlotsOf(tx, gpu_type, type.hosts_per_instance,
                                                           freed_hosts, now, unknown_after));
        }
        if (free.empty()) return false;
        first_slot = free[0].name;
        return true;
      }));
  if (!worth_it) return DrainResult{};
  std::vector<std::string> woken_hosts;
  bool mailed = false;
  auto result = db_.Write([&](store::Transaction& tx) -> core::Result<DrainResult> {
    woken_hosts.clear();
    mailed = false;
    DrainResult out;
    GPUWERK_ASSIGN_OR_RETURN(internal::TypeRow type, internal::LoadType(tx, gpu_type));
    // Free slots by host name from `first_slot` on, fetched a batch at a time, each batch after
    // the last slot of the one before.
    std::vector<internal::Slot> slots;
    size_t next_slot = 0;
    bool slots_exhausted = false;
    std::string from_name = first_slot;
    if (!freed_hosts.empty()) {
      GPUWERK_ASSIGN_OR_RETURN(slots, internal::SlotsOf(tx, gpu_type, type.hosts_per_instance,
                                                        freed_hosts, now, unknown_after));
      slots_exhausted = true;
    }
    auto have_slot = [&]() -> core::Result<bool> {
      if (next_slot < slots.size()) return true;
      if (slots_exhausted) return false;
      if (!slots.empty()) from_name = slots.back().name + '\x01';  // the next name after it
      GPUWERK_ASSIGN_OR_RETURN(
          slots, internal::FreeSlots(tx, gpu_type, type.hosts_per_instance, kDrainBatch, now,
                                     unknown_after, from_name));
      next_slot = 0;
      slots_exhausted = static_cast<int64_t>(slots.size()) < kDrainBatch;
      return !slots.empty();
    };
    // The open entries in seq order, a batch at a time through the (gpu_type, status, seq)
    // index: a decision costs O(log n) plus the entries passed over at the head, never a read of
    // the whole queue.
    std::vector<store::Row> entries;
    size_t next_entry = 0;
    int64_t after_seq = 0;
    bool entries_exhausted = false;
    auto next = [&]() -> core::Result<const store::Row*> {
      if (next_entry >= entries.size()) {
        if (entries_exhausted) return nullptr;
        GPUWERK_ASSIGN_OR_RETURN(
            entries,
            tx.Query("SELECT q.id, q.person_id, q.name, q.ssh_key_id, q.passed_over_at, "
                     "q.instance_id, p.email, q.seq FROM queue_entries q JOIN persons p ON p.id = "
                     "q.person_id WHERE q.gpu_type = ? AND q.status = 'open' AND q.seq > ? "
                     "ORDER BY q.seq LIMIT ?",
                     {gpu_type, after_seq, kDrainBatch}));
        next_entry = 0;
        entries_exhausted = static_cast<int64_t>(entries.size()) < kDrainBatch;
        if (entries.empty()) return nullptr;
      }
      const store::Row* row = &entries[next_entry++];
      after_seq = row->Int(7);
      return row;
    };
    for (;;) {
      GPUWERK_ASSIGN_OR_RETURN(bool slot_left, have_slot());
      if (!slot_left) break;
      GPUWERK_ASSIGN_OR_RETURN(const store::Row* row, next());
      if (row == nullptr) break;
      const store::Row& e = *row;
      const std::string entry_id = e.Text(0), person_id = e.Text(1), name = e.Text(2);
      const std::string email = e.Text(6);
      auto keep_place = [&](const std::string& why) -> core::Result<void> {
        GPUWERK_TRY(
            tx.Exec("UPDATE queue_entries SET last_failure = ? WHERE id = ?", {why, entry_id}));
        return {};
      };
      if (!can_launch_(person_id)) {
        // passed over, keeps its place; its owner is told once.
        out.passed_over.push_back(entry_id);
        if (e.IsNull(4)) {
          GPUWERK_TRY(tx.Exec(
              "UPDATE queue_entries SET passed_over_at = ?, last_failure = ? WHERE id = ?",
              {now, std::string("passed over: your account cannot launch right now"), entry_id}));
          GPUWERK_TRY(outbox_.Enqueue(tx, QueuePassedOverMail(email, name, gpu_type)));
          GPUWERK_TRY(store::RecordAudit(tx, clock_, rng_,
                                         {.actor_id = "",
                                          .action = "queue.pass_over",
                                          .target = entry_id,
                                          .source_address = "system",
                                          .detail = {{"owner", person_id}, {"name", name}}}));
          mailed = true;
        }
        continue;
      }
      // An entry put back after a failed launch: its failed instance (no hosts, session ended)
      // still holds the name; the new launch replaces it.
      if (!e.IsNull(5)) {
        GPUWERK_TRY(tx.Exec(
            "UPDATE instances SET desired = 'deleted', status = 'deleted', deleted_at = ? WHERE "
            "id = ? AND status = 'failed' AND deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM "
            "placements p WHERE p.instance_id = instances.id)",
            {now, e.Text(5)}));
      }
      if (auto free = internal::CheckNameFree(tx, person_id, name, entry_id); !free) {
        GPUWERK_TRY(keep_place("not launched: " + free.error().message));
        continue;
      }
      auto launched = internal::InsertInstance(
          tx, clock_, rng_, options_,
          {.person_id = person_id,
           .name = name,
           .ssh_key_id = e.Text(3),
           .gpu_type = gpu_type,
           .host_ids = slots[next_slot].host_ids,
           .actor_id = "",
           .source_address = "queue",
           .audit_detail = {{"queue_entry_id", entry_id}, {"owner", person_id}}});
      if (!launched && launched.error().api_code == "not_found") {
        GPUWERK_TRY(keep_place("not launched: its SSH key is gone"));
        continue;
      }
      if (!launched) return std::unexpected(launched.error());
      ++next_slot;
      core::FaultPoint("queue_instance_written");
      GPUWERK_TRY(
          tx.Exec("UPDATE queue_entries SET status = 'launched', instance_id = ?, left_at = ?, "
                  "launch_attempts = launch_attempts + 1, passed_over_at = NULL WHERE id = ? AND "
                  "status = 'open'",
                  {*launched, now, entry_id}));
      GPUWERK_ASSIGN_OR_RETURN(
          auto hostname, tx.QueryOne("SELECT hostname FROM instances WHERE id = ?", {*launched}));
      GPUWERK_TRY(outbox_.Enqueue(tx, QueueLaunchMail(email, name, hostname->Text(0), gpu_type)));
      GPUWERK_TRY(store::RecordAudit(
          tx, clock_, rng_,
          {.actor_id = "",
           .action = "queue.launch",
           .target = entry_id,
           .source_address = "system",
           .detail = {{"owner", person_id}, {"name", name}, {"instance_id", *launched}}}));
      GPUWERK_ASSIGN_OR_RETURN(
          auto host_names,
          tx.Query("SELECT h.name FROM placements p JOIN hosts h ON h.id = p.host_id WHERE "
                   "p.instance_id = ?",
                   {*launched}));
      for (const auto& h : host_names) woken_hosts.push_back(h.Text(0));
      mailed = true;
      out.launched.push_back(entry_id);
    }
    return out;
  });
  if (!result) return result;
  core::FaultPoint("queue_drain_committed");
  if (notifier_ != nullptr && !woken_hosts.empty()) notifier_->Notify(woken_hosts);
  if (mailed && mail_wake_) mail_wake_();
  if (!result->launched.empty()) {
    spdlog::info("sched: launched {} queue entr{} of {}", result->launched.size(),
                 result->launched.size() == 1 ? "y" : "ies", gpu_type);
  }
  return result;
}

core::Result<DrainResult> QueueService::DrainAll() {
  GPUWERK_ASSIGN_OR_RETURN(auto types, db_.Read([](store::Transaction& tx) {
    return tx.Query("SELECT name FROM gpu_types ORDER BY name");
  }));
  DrainResult all;
  for (const auto& t : types) {
    GPUWERK_ASSIGN_OR_RETURN(DrainResult one, Drain(t.Text(0)));
    all.launched.insert(all.launched.end(), one.launched.begin(), one.launched.end());
    all.passed_over.insert(all.passed_over.end(), one.passed_over.begin(), one.passed_over.end());
  }
  return all;
}

}  // namespace gpuwerk::sched
