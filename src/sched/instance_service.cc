#include "sched/instance_service.h"

#include "audit/audit_log.h"
#include "billing/billing_session_table.h"
#include "core/fault_point.h"
#include "sched/host_registry.h"
#include "sched/instance_table.h"
#include "sched/internal/gpu_type_table.h"
#include "sched/internal/host_table.h"
#include "sched/internal/instance_rows.h"
#include "sched/internal/launch.h"
#include "sched/internal/placement_table.h"
#include "sched/internal/queue_entry_table.h"
#include "sched/queue_service.h"

namespace gpuwerk::sched {
namespace {

core::Error NoCapacity(const std::string& gpu_type) {
  return core::Error(core::ErrorCode::kFailedPrecondition, "no_capacity",
                     "No " + gpu_type +
                         " host is free right now. You can join the queue for this GPU type.")
      .WithDetail("gpu_type", gpu_type)
      .WithDetail("queue", {{"offer", true},
                            {"method", "POST"},
                            {"path", "/api/v1/queue-entries"},
                            {"gpu_type", gpu_type}});
}

core::Error Offline(const std::string& gpu_type) {
  return core::Error(core::ErrorCode::kFailedPrecondition, "gpu_type_offline",
                     "No " + gpu_type +
                         " capacity is online right now. Join the queue for this GPU type; "
                         "you are launched when it comes online.")
      .WithDetail("gpu_type", gpu_type);
}

/// `person_id`'s live instance with this id or name. Errors: not_found (also another
/// person's, R-19).
core::Result<InstanceRow> LiveRow(store::Transaction& tx, const std::string& person_id,
                                  std::string_view id_or_name) {
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           InstanceTable::FindLive(tx, person_id, std::string(id_or_name)));
  if (!row) return core::NotFound("Instance");
  return std::move(*row);
}

}  // namespace

core::Result<Instance> InstanceService::Create(const std::string& person_id, std::string_view name,
                                               std::string_view ssh_key_id,
                                               std::string_view gpu_type,
                                               const std::string& source_address,
                                               const InTransaction& in_tx) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto created, CreateIfOnline(person_id, name, ssh_key_id, gpu_type, source_address, in_tx));
  if (!created) return core::Fail(Offline(std::string(gpu_type)));
  return std::move(*created);
}

core::Result<CreateOutcome> InstanceService::CreateOrJoinQueue(
    QueueService& queue, const std::string& person_id, std::string_view name,
    std::string_view ssh_key_id, std::string_view gpu_type, const std::string& source_address,
    const InTransaction& on_create, const QueueService::InTransaction& on_join) {
  GPUWERK_ASSIGN_OR_RETURN(auto created, CreateIfOnline(person_id, name, ssh_key_id, gpu_type,
                                                        source_address, on_create));
  if (created) return CreateOutcome{.instance = std::move(*created)};
  // Issue 5: choosing a type that is not online enters its queue directly.
  GPUWERK_ASSIGN_OR_RETURN(
      QueueEntry entry, queue.Join(person_id, gpu_type, name, ssh_key_id, source_address, on_join));
  return CreateOutcome{.queue_entry = std::move(entry)};
}

core::Result<std::optional<Instance>> InstanceService::CreateIfOnline(
    const std::string& person_id, std::string_view name, std::string_view ssh_key_id,
    std::string_view gpu_type, const std::string& source_address, const InTransaction& in_tx) {
  GPUWERK_TRY(ValidateDnsLabel(name, "An instance name"));
  // The placement's UNIQUE(host_id) makes a concurrent create that took the same host lose with
  // the store's conflict; it retries once against the hosts still free.
  for (int attempt = 0;; ++attempt) {
    auto created = CreateOnce(person_id, std::string(name), std::string(ssh_key_id),
                              std::string(gpu_type), source_address, in_tx);
    if (created) {
      if (*created) {
        core::FaultPoint("instance_row_written");
        WakeHost(**created);
      }
      return created;
    }
    // A lost race (a host taken by a concurrent transaction) is a store constraint violation.
    if (!store::IsConstraintViolation(created.error())) return created;
    if (attempt >= 1) return core::Fail(NoCapacity(std::string(gpu_type)));
  }
}

core::Result<std::optional<Instance>> InstanceService::CreateOnce(
    const std::string& person_id, const std::string& name, const std::string& ssh_key_id,
    const std::string& gpu_type, const std::string& source_address, const InTransaction& in_tx) {
  const int64_t now = clock_.NowUnix();
  return db_.Write([&](store::Transaction& tx) -> core::Result<std::optional<Instance>> {
    GPUWERK_TRY(internal::OwnKeyLine(tx, person_id, ssh_key_id));
    GPUWERK_ASSIGN_OR_RETURN(GpuTypeConfig type, internal::LoadType(tx, gpu_type));
    GPUWERK_TRY(internal::CheckNameFree(tx, person_id, name));
    GPUWERK_ASSIGN_OR_RETURN(
        internal::Capacity capacity,
        internal::HostTable::LoadCapacity(tx, gpu_type, type.hosts_per_instance, now,
                                          options_.host_unknown_after_seconds));
    if (!capacity.online) return std::optional<Instance>();
    // a launch needs a payment method (joining the queue, above, needs none).
    if (gate_) GPUWERK_TRY(gate_(tx, person_id, "launch"));
    // People already waiting for this type come first: a slot is only free for a direct
    // create when more instances fit than there are open entries (docs/queue.md).
    GPUWERK_ASSIGN_OR_RETURN(const int64_t ahead,
                             internal::QueueEntryTable::CountOpen(tx, gpu_type));
    if (capacity.free_slots <= ahead) return core::Fail(NoCapacity(gpu_type));
    GPUWERK_ASSIGN_OR_RETURN(
        auto slots, internal::HostTable::FreeSlots(tx, gpu_type, type.hosts_per_instance, ahead + 1,
                                                   now, options_.host_unknown_after_seconds));
    if (static_cast<int64_t>(slots.size()) <= ahead) return core::Fail(NoCapacity(gpu_type));
    std::vector<std::string> hosts = std::move(slots[static_cast<size_t>(ahead)].host_ids);
    GPUWERK_ASSIGN_OR_RETURN(std::string id,
                             internal::InsertInstance(tx, clock_, rng_, options_,
                                                      {.person_id = person_id,
                                                       .name = name,
                                                       .ssh_key_id = ssh_key_id,
                                                       .gpu_type = gpu_type,
                                                       .host_ids = std::move(hosts),
                                                       .actor_id = person_id,
                                                       .source_address = source_address}));
    GPUWERK_ASSIGN_OR_RETURN(
        auto out, internal::LoadInstance(tx, id, now, options_.host_unknown_after_seconds));
    if (in_tx) GPUWERK_TRY(in_tx(tx, *out));
    return out;
  });
}

core::Result<InstancePage> InstanceService::List(const std::string& person_id, int page) {
  GPUWERK_TRY(CheckPage(page));
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<InstancePage> {
    InstancePage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(out.total, InstanceTable::CountLive(tx, person_id));
    out.pages = PageCount(out.total);
    GPUWERK_ASSIGN_OR_RETURN(auto rows,
                             InstanceTable::ListLive(tx, person_id, kPageSize, PageOffset(page)));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(
          auto in, internal::LoadInstance(tx, r.id, now, options_.host_unknown_after_seconds));
      if (in) out.items.push_back(std::move(*in));
    }
    return out;
  });
}

core::Result<OwnedInstancePage> InstanceService::ListAll(const InstanceFilter& filter,
                                                         std::string_view before,
                                                         std::string_view after) {
  GPUWERK_ASSIGN_OR_RETURN(core::KeysetQuery query, core::ParseKeysetQuery(before, after));
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<OwnedInstancePage> {
    OwnedInstancePage out;
    GPUWERK_ASSIGN_OR_RETURN(out.total, InstanceTable::CountAll(tx, filter));
    out.pages = PageCount(out.total);
    GPUWERK_ASSIGN_OR_RETURN(auto rows, InstanceTable::PageAll(tx, filter, query, kPageSize));
    if (query.after && static_cast<int64_t>(rows.size()) < kPageSize) {
      // Fewer newer rows than a page: the newest page, so that pages keep their size.
      GPUWERK_ASSIGN_OR_RETURN(rows, InstanceTable::PageAll(tx, filter, {}, kPageSize));
    }
    if (rows.empty()) return out;
    const core::KeysetKey first{.at = rows.front().created_at, .id = rows.front().id};
    const core::KeysetKey last{.at = rows.back().created_at, .id = rows.back().id};
    GPUWERK_ASSIGN_OR_RETURN(int64_t newer, InstanceTable::CountAll(tx, filter, first));
    out.page = newer / kPageSize + 1;
    if (newer > 0) out.prev = core::FormatKeyset(first);
    if (newer + static_cast<int64_t>(rows.size()) < out.total) out.next = core::FormatKeyset(last);
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(
          auto in, internal::LoadInstance(tx, r.id, now, options_.host_unknown_after_seconds));
      if (in) out.items.push_back({.person_id = r.person_id, .instance = std::move(*in)});
    }
    return out;
  });
}

core::Result<Instance> InstanceService::Get(const std::string& person_id,
                                            std::string_view id_or_name) {
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<Instance> {
    GPUWERK_ASSIGN_OR_RETURN(InstanceRow row, LiveRow(tx, person_id, id_or_name));
    GPUWERK_ASSIGN_OR_RETURN(
        auto in, internal::LoadInstance(tx, row.id, now, options_.host_unknown_after_seconds));
    if (!in) return core::NotFound("Instance");
    return std::move(*in);
  });
}

core::Result<Instance> InstanceService::ChangeLive(const std::string& person_id,
                                                   std::string_view id_or_name,
                                                   const LiveChange& change) {
  const int64_t now = clock_.NowUnix();
  auto result = db_.Write([&](store::Transaction& tx) -> core::Result<Instance> {
    GPUWERK_ASSIGN_OR_RETURN(InstanceRow row, LiveRow(tx, person_id, id_or_name));
    GPUWERK_TRY(change(tx, row, now));
    GPUWERK_ASSIGN_OR_RETURN(
        auto in, internal::LoadInstance(tx, row.id, now, options_.host_unknown_after_seconds));
    return std::move(*in);
  });
  if (result) WakeHost(*result);
  return result;
}

core::Result<Instance> InstanceService::Restart(const std::string& person_id,
                                                std::string_view id_or_name,
                                                const std::string& source_address) {
  return ChangeLive(
      person_id, id_or_name,
      [&](store::Transaction& tx, const InstanceRow& row, int64_t) -> core::Result<void> {
        if (row.desired == DesiredState::kDeleted) {
          return core::Fail(core::ErrorCode::kFailedPrecondition, "instance_deleting",
                            "This instance is being deleted; it cannot be restarted.");
        }
        if (row.status == InstanceStatus::kFailed) {
          return core::Fail(core::ErrorCode::kFailedPrecondition, "instance_failed",
                            "This instance failed to start; delete it and create a new one.");
        }
        if (gate_) GPUWERK_TRY(gate_(tx, person_id, "restart"));
        GPUWERK_TRY(InstanceTable::BumpRestart(tx, row.id));
        return audit::RecordAudit(
            tx, clock_, rng_,
            {.actor_id = person_id,
             .action = "instance.restart",
             .target = row.id,
             .source_address = source_address,
             .detail = {{"name", row.name}, {"restart_generation", row.restart_generation + 1}}});
      });
}

core::Result<Instance> InstanceService::Delete(const std::string& person_id,
                                               std::string_view id_or_name,
                                               const std::string& source_address) {
  auto deleted = ChangeLive(
      person_id, id_or_name,
      [&](store::Transaction& tx, const InstanceRow& row, int64_t now) -> core::Result<void> {
        if (row.desired == DesiredState::kDeleted) return {};  // asked already
        GPUWERK_TRY(InstanceTable::MarkDeleting(tx, row.id));
        // the session ends when the delete is asked for, not when the container is gone.
        GPUWERK_TRY(billing::BillingSessionTable::End(tx, row.billing_session_id, now));
        GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                       {.actor_id = person_id,
                                        .action = "instance.delete",
                                        .target = row.id,
                                        .source_address = source_address,
                                        .detail = {{"name", row.name}}}));
        GPUWERK_TRY(internal::FinalizeIfGone(tx, clock_, rng_, row.id));
        return {};
      });
  // Committed: its relay sessions end now (docs/ssh.md "Revocation"), not at the next re-check.
  if (deleted && access_changes_ != nullptr) {
    access_changes_->Publish({.instance_ids = {deleted->id}, .reason = "instance deleted"});
  }
  return deleted;
}

void InstanceService::WakeHost(const Instance& instance) {
  if (notifier_ != nullptr && !instance.hosts.empty()) notifier_->Notify(instance.hosts);
}

core::Result<std::vector<GpuType>> InstanceService::GpuTypes() {
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<GpuType>> {
    GPUWERK_ASSIGN_OR_RETURN(auto types, internal::GpuTypeTable::List(tx));
    return GpuTypesNow(tx, types, now);
  });
}

core::Result<GpuTypePage> InstanceService::GpuTypesPage(int page) {
  GPUWERK_TRY(CheckPage(page));
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<GpuTypePage> {
    GpuTypePage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(out.total, internal::GpuTypeTable::Count(tx));
    out.pages = PageCount(out.total);
    GPUWERK_ASSIGN_OR_RETURN(auto types,
                             internal::GpuTypeTable::List(tx, kPageSize, PageOffset(page)));
    GPUWERK_ASSIGN_OR_RETURN(out.items, GpuTypesNow(tx, types, now));
    return out;
  });
}

core::Result<std::vector<GpuType>> InstanceService::GpuTypesNow(
    store::Transaction& tx, const std::vector<GpuTypeConfig>& types, int64_t now) {
  std::vector<GpuType> out;
  for (const auto& t : types) {
    GPUWERK_ASSIGN_OR_RETURN(const int64_t queued,
                             internal::QueueEntryTable::CountOpen(tx, t.name));
    GPUWERK_ASSIGN_OR_RETURN(internal::Capacity capacity, internal::HostTable::LoadCapacity(
                                                              tx, t.name, t.hosts_per_instance, now,
                                                              options_.host_unknown_after_seconds));
    out.push_back(GpuType{.name = t.name,
                          .description = t.description,
                          .hosts_per_instance = t.hosts_per_instance,
                          .price_minor_per_hour = t.price_minor_per_hour,
                          .currency = t.currency,
                          .free_instances = std::max<int64_t>(0, capacity.free_slots - queued),
                          .online = capacity.online,
                          .online_hosts = capacity.heard_hosts,
                          .queued = queued,
                          .hosts = capacity.hosts,
                          .pairs = capacity.pairs});
  }
  return out;
}

core::Result<int64_t> InstanceService::MarkUnknownHosts(int64_t now_unix) {
  const int64_t since = now_unix - options_.host_unknown_after_seconds;
  // Most rounds find no silent host: decided in a read, without a write transaction (on
  // PostgreSQL, the leader's fenced write) every second.
  GPUWERK_ASSIGN_OR_RETURN(auto silent, db_.Read([&](store::Transaction& tx) {
    return internal::PlacementTable::InstancesOnSilentHosts(tx, since);
  }));
  if (silent.empty()) return int64_t{0};
  return db_.Write([&](store::Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto ids, internal::PlacementTable::InstancesOnSilentHosts(tx, since));
    int64_t changed = 0;
    for (const auto& id : ids) {
      GPUWERK_ASSIGN_OR_RETURN(bool marked, InstanceTable::MarkUnknown(tx, id));
      if (marked) ++changed;
    }
    return changed;
  });
}

}  // namespace gpuwerk::sched
