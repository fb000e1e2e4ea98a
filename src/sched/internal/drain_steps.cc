#include "sched/internal/drain_steps.h"

#include "audit/audit_log.h"
#include "core/fault_point.h"
#include "sched/instance_table.h"
#include "sched/internal/launch.h"
#include "sched/internal/placement_table.h"
#include "sched/queue_mails.h"

namespace gpuwerk::sched::internal {

SlotCursor::SlotCursor(store::Transaction& tx, std::string gpu_type, int64_t hosts_per_instance,
                       int64_t now, int64_t unknown_after, std::string from_name,
                       std::vector<std::string> freed_hosts)
    : tx_(tx),
      gpu_type_(std::move(gpu_type)),
      hosts_per_instance_(hosts_per_instance),
      now_(now),
      unknown_after_(unknown_after),
      from_name_(std::move(from_name)),
      freed_hosts_(std::move(freed_hosts)) {}

core::Result<const Slot*> SlotCursor::Current() {
  if (!fetched_ && !freed_hosts_.empty()) {
    fetched_ = true;
    exhausted_ = true;
    GPUWERK_ASSIGN_OR_RETURN(slots_, HostTable::SlotsOf(tx_, gpu_type_, hosts_per_instance_,
                                                        freed_hosts_, now_, unknown_after_));
  }
  if (next_ < slots_.size()) return &slots_[next_];
  if (exhausted_) return nullptr;
  if (!slots_.empty()) from_name_ = slots_.back().name + '\x01';  // the next name after it
  fetched_ = true;
  GPUWERK_ASSIGN_OR_RETURN(
      slots_, HostTable::FreeSlots(tx_, gpu_type_, hosts_per_instance_, kDrainBatch, now_,
                                   unknown_after_, from_name_));
  next_ = 0;
  exhausted_ = static_cast<int64_t>(slots_.size()) < kDrainBatch;
  if (slots_.empty()) return nullptr;
  return &slots_[next_];
}

core::Result<const DrainCandidate*> EntryCursor::Next() {
  if (next_ >= batch_.size()) {
    if (exhausted_) return nullptr;
    GPUWERK_ASSIGN_OR_RETURN(batch_,
                             QueueEntryTable::OpenAfter(tx_, gpu_type_, after_seq_, kDrainBatch));
    next_ = 0;
    exhausted_ = static_cast<int64_t>(batch_.size()) < kDrainBatch;
    if (batch_.empty()) return nullptr;
  }
  const DrainCandidate* c = &batch_[next_++];
  after_seq_ = c->entry.seq;
  return c;
}

core::Result<bool> PassOver(DrainContext& ctx, const DrainCandidate& c, std::string_view why) {
  const QueueEntryRow& e = c.entry;
  if (e.passed_over_at) return false;  // its owner was told already in this streak
  GPUWERK_TRY(
      QueueEntryTable::MarkPassedOver(ctx.tx, e.id, ctx.now, "passed over: " + std::string(why)));
  GPUWERK_TRY(ctx.outbox.Enqueue(ctx.tx, QueuePassedOverMail(c.email, e.name, ctx.gpu_type, why)));
  GPUWERK_TRY(audit::RecordAudit(ctx.tx, ctx.clock, ctx.rng,
                                 {.actor_id = "",
                                  .action = "queue.pass_over",
                                  .target = e.id,
                                  .source_address = "system",
                                  .detail = {{"owner", e.person_id}, {"name", e.name}}}));
  return true;
}

core::Result<void> RetireFailedLaunch(DrainContext& ctx, const QueueEntryRow& entry) {
  if (entry.instance_id.empty()) return {};
  GPUWERK_ASSIGN_OR_RETURN(int64_t holding, PlacementTable::CountOf(ctx.tx, entry.instance_id));
  if (holding != 0) return {};
  return InstanceTable::RetireFailed(ctx.tx, entry.instance_id, ctx.now);
}

core::Result<std::optional<QueueLaunch>> LaunchEntry(DrainContext& ctx, const DrainCandidate& c,
                                                     const Slot& slot) {
  const QueueEntryRow& e = c.entry;
  auto keep_place = [&](const std::string& why) -> core::Result<std::optional<QueueLaunch>> {
    GPUWERK_TRY(QueueEntryTable::SetLastFailure(ctx.tx, e.id, why));
    return std::optional<QueueLaunch>();
  };
  GPUWERK_TRY(RetireFailedLaunch(ctx, e));
  if (auto free = CheckNameFree(ctx.tx, e.person_id, e.name, e.id); !free) {
    return keep_place("not launched: " + free.error().message);
  }
  auto launched =
      InsertInstance(ctx.tx, ctx.clock, ctx.rng, ctx.options,
                     {.person_id = e.person_id,
                      .name = e.name,
                      .ssh_key_id = e.ssh_key_id,
                      .gpu_type = ctx.gpu_type,
                      .host_ids = slot.host_ids,
                      .actor_id = "",
                      .source_address = "queue",
                      .audit_detail = {{"queue_entry_id", e.id}, {"owner", e.person_id}}});
  if (!launched && launched.error().code == core::ErrorCode::kNotFound) {
    return keep_place("not launched: its SSH key is gone");
  }
  if (!launched) return std::unexpected(launched.error());
  core::FaultPoint("queue_instance_written");
  GPUWERK_TRY(QueueEntryTable::MarkLaunched(ctx.tx, e.id, *launched, ctx.now));
  GPUWERK_ASSIGN_OR_RETURN(auto instance, InstanceTable::Find(ctx.tx, *launched));
  GPUWERK_TRY(ctx.outbox.Enqueue(
      ctx.tx, QueueLaunchMail(c.email, e.name, instance->hostname, ctx.gpu_type)));
  GPUWERK_TRY(audit::RecordAudit(
      ctx.tx, ctx.clock, ctx.rng,
      {.actor_id = "",
       .action = "queue.launch",
       .target = e.id,
       .source_address = "system",
       .detail = {{"owner", e.person_id}, {"name", e.name}, {"instance_id", *launched}}}));
  GPUWERK_ASSIGN_OR_RETURN(auto hosts, PlacementTable::HostNamesOf(ctx.tx, *launched));
  return std::optional<QueueLaunch>(QueueLaunch{.instance_id = *launched, .host_names = hosts});
}

}  // namespace gpuwerk::sched::internal
