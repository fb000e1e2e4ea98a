#include "sched/instance_service.h"

#include "core/fault_point.h"
#include "sched/host_registry.h"
#include "sched/internal/instance_rows.h"
#include "sched/internal/launch.h"
#include "store/audit_log.h"

namespace gpuwerk::sched {
namespace {

constexpr int kPageSize = 15;

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

/// The live instance of `person_id` with this id or name; nullopt when none.
core::Result<std::optional<std::string>> FindLive(store::Transaction& tx,
                                                  const std::string& person_id,
                                                  std::string_view id_or_name) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT id FROM instances WHERE person_id = ? AND deleted_at IS NULL "
                            "AND (id = ? OR name = ?) ORDER BY created_at LIMIT 1",
                            {person_id, std::string(id_or_name), std::string(id_or_name)}));
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(row->Text(0));
}

}  // namespace

core::Result<Instance> InstanceService::Create(const std::string& person_id, std::string_view name,
                                               std::string_view ssh_key_id,
                                               std::string_view gpu_type,
                                               const std::string& source_address,
                                               const InTransaction& in_tx) {
  GPUWERK_TRY(ValidateDnsLabel(name, "An instance name"));
  // The placement's UNIQUE(host_id) makes a concurrent create that took the same host lose with
  // constraint_violation; it retries once against the hosts still free.
  for (int attempt = 0;; ++attempt) {
    auto created = CreateOnce(person_id, std::string(name), std::string(ssh_key_id),
                              std::string(gpu_type), source_address, in_tx);
    if (created) {
      core::FaultPoint("instance_row_written");
      WakeHost(*created);
      return created;
    }
    if (created.error().api_code != "constraint_violation") return created;
    if (attempt >= 1) return core::Fail(NoCapacity(std::string(gpu_type)));
  }
}

core::Result<Instance> InstanceService::CreateOnce(
    const std::string& person_id, const std::string& name, const std::string& ssh_key_id,
    const std::string& gpu_type, const std::string& source_address, const InTransaction& in_tx) {
  const int64_t now = clock_.NowUnix();
  return db_.Write([&](store::Transaction& tx) -> core::Result<Instance> {
    GPUWERK_ASSIGN_OR_RETURN(auto key, tx.QueryOne("SELECT id FROM ssh_keys WHERE id = ? AND "
                                                   "person_id = ?",
                                                   {ssh_key_id, person_id}));
    if (!key) return core::NotFound("SSH key");
    GPUWERK_ASSIGN_OR_RETURN(internal::TypeRow type, internal::LoadType(tx, gpu_type));
    GPUWERK_TRY(internal::CheckNameFree(tx, person_id, name));
    GPUWERK_ASSIGN_OR_RETURN(internal::Capacity capacity,
                             internal::LoadCapacity(tx, gpu_type, type.hosts_per_instance, now,
                                                    options_.host_unknown_after_seconds));
    if (!capacity.online) return core::Fail(Offline(gpu_type));
    // People already waiting for this type come first: a slot is only free for a direct
    // create when more instances fit than there are open entries (docs/queue.md).
    GPUWERK_ASSIGN_OR_RETURN(auto waiting,
                             tx.QueryOne("SELECT COUNT(*) FROM queue_entries WHERE gpu_type = ? "
                                         "AND status = 'open'",
                                         {gpu_type}));
    const int64_t ahead = waiting->Int(0);
    if (capacity.free_slots <= ahead) return core::Fail(NoCapacity(gpu_type));
    GPUWERK_ASSIGN_OR_RETURN(
        auto slots, internal::FreeSlots(tx, gpu_type, type.hosts_per_instance, ahead + 1, now,
                                        options_.host_unknown_after_seconds));
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
    return std::move(*out);
  });
}

core::Result<InstancePage> InstanceService::List(const std::string& person_id, int page) {
  if (page < 1 || page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<InstancePage> {
    InstancePage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(auto count,
                             tx.QueryOne("SELECT COUNT(*) FROM instances WHERE person_id = ? AND "
                                         "deleted_at IS NULL",
                                         {person_id}));
    out.total = count->Int(0);
    out.pages = std::max<int64_t>(1, (out.total + kPageSize - 1) / kPageSize);
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, tx.Query("SELECT id FROM instances WHERE person_id = ? AND deleted_at IS NULL "
                            "ORDER BY created_at, id LIMIT ? OFFSET ?",
                            {person_id, int64_t{kPageSize}, int64_t{(page - 1) * kPageSize}}));
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(
          auto in, internal::LoadInstance(tx, r.Text(0), now, options_.host_unknown_after_seconds));
      if (in) out.items.push_back(std::move(*in));
    }
    return out;
  });
}

core::Result<Instance> InstanceService::Get(const std::string& person_id,
                                            std::string_view id_or_name) {
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<Instance> {
    GPUWERK_ASSIGN_OR_RETURN(auto id, FindLive(tx, person_id, id_or_name));
    if (!id) return core::NotFound("Instance");
    GPUWERK_ASSIGN_OR_RETURN(
        auto in, internal::LoadInstance(tx, *id, now, options_.host_unknown_after_seconds));
    if (!in) return core::NotFound("Instance");
    return std::move(*in);
  });
}

core::Result<Instance> InstanceService::Restart(const std::string& person_id,
                                                std::string_view id_or_name,
                                                const std::string& source_address) {
  const int64_t now = clock_.NowUnix();
  auto result = db_.Write([&](store::Transaction& tx) -> core::Result<Instance> {
    GPUWERK_ASSIGN_OR_RETURN(auto id, FindLive(tx, person_id, id_or_name));
    if (!id) return core::NotFound("Instance");
    GPUWERK_ASSIGN_OR_RETURN(
        auto row, tx.QueryOne("SELECT desired, status, name, restart_generation FROM instances "
                              "WHERE id = ?",
                              {*id}));
    if (row->Text(0) == "deleted") {
      return core::Fail(core::ErrorCode::kFailedPrecondition, "instance_deleting",
                        "This instance is being deleted; it cannot be restarted.");
    }
    if (row->Text(1) == "failed") {
      return core::Fail(core::ErrorCode::kFailedPrecondition, "instance_failed",
                        "This instance failed to start; delete it and create a new one.");
    }
    GPUWERK_TRY(
        tx.Exec("UPDATE instances SET restart_generation = restart_generation + 1, "
                "status = 'restarting', status_reason = '' WHERE id = ?",
                {*id}));
    GPUWERK_TRY(store::RecordAudit(
        tx, clock_, rng_,
        {.actor_id = person_id,
         .action = "instance.restart",
         .target = *id,
         .source_address = source_address,
         .detail = {{"name", row->Text(2)}, {"restart_generation", row->Int(3) + 1}}}));
    GPUWERK_ASSIGN_OR_RETURN(
        auto in, internal::LoadInstance(tx, *id, now, options_.host_unknown_after_seconds));
    return std::move(*in);
  });
  if (result) WakeHost(*result);
  return result;
}

core::Result<Instance> InstanceService::Delete(const std::string& person_id,
                                               std::string_view id_or_name,
                                               const std::string& source_address) {
  const int64_t now = clock_.NowUnix();
  auto result = db_.Write([&](store::Transaction& tx) -> core::Result<Instance> {
    GPUWERK_ASSIGN_OR_RETURN(auto id, FindLive(tx, person_id, id_or_name));
    if (!id) return core::NotFound("Instance");
    GPUWERK_ASSIGN_OR_RETURN(
        auto row, tx.QueryOne("SELECT desired, name, billing_session_id FROM instances WHERE "
                              "id = ?",
                              {*id}));
    if (row->Text(0) != "deleted") {
      GPUWERK_TRY(
          tx.Exec("UPDATE instances SET desired = 'deleted', status = 'deleting', "
                  "status_reason = '' WHERE id = ?",
                  {*id}));
      // the session ends when the delete is asked for, not when the container is gone.
      GPUWERK_TRY(
          tx.Exec("UPDATE billing_sessions SET ended_at = ? WHERE id = ? AND ended_at "
                  "IS NULL",
                  {now, row->Text(2)}));
      GPUWERK_TRY(store::RecordAudit(tx, clock_, rng_,
                                     {.actor_id = person_id,
                                      .action = "instance.delete",
                                      .target = *id,
                                      .source_address = source_address,
                                      .detail = {{"name", row->Text(1)}}}));
      GPUWERK_TRY(internal::FinalizeIfGone(tx, clock_, rng_, *id));
    }
    GPUWERK_ASSIGN_OR_RETURN(
        auto in, internal::LoadInstance(tx, *id, now, options_.host_unknown_after_seconds));
    return std::move(*in);
  });
  if (result) WakeHost(*result);
  return result;
}

void InstanceService::WakeHost(const Instance& instance) {
  if (notifier_ != nullptr && !instance.hosts.empty()) notifier_->Notify(instance.hosts);
}

core::Result<std::vector<GpuType>> InstanceService::GpuTypes() {
  const int64_t now = clock_.NowUnix();
  return db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<GpuType>> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows,
        tx.Query("SELECT g.name, g.description, g.hosts_per_instance, g.price_minor_per_hour, "
                 "g.currency, (SELECT COUNT(*) FROM queue_entries q WHERE q.gpu_type = g.name "
                 "AND q.status = 'open') FROM gpu_types g ORDER BY g.name"));
    std::vector<GpuType> out;
    for (const auto& r : rows) {
      GPUWERK_ASSIGN_OR_RETURN(internal::Capacity capacity,
                               internal::LoadCapacity(tx, r.Text(0), r.Int(2), now,
                                                      options_.host_unknown_after_seconds));
      out.push_back(GpuType{.name = r.Text(0),
                            .description = r.Text(1),
                            .hosts_per_instance = r.Int(2),
                            .price_minor_per_hour = r.Int(3),
                            .currency = r.Text(4),
                            .free_instances = std::max<int64_t>(0, capacity.free_slots - r.Int(5)),
                            .online = capacity.online,
                            .online_hosts = capacity.heard_hosts,
                            .queued = r.Int(5),
                            .hosts = capacity.hosts,
                            .pairs = capacity.pairs});
    }
    return out;
  });
}

core::Result<int64_t> InstanceService::MarkUnknownHosts(int64_t now_unix) {
  const int64_t since = now_unix - options_.host_unknown_after_seconds;
  return db_.Write([&](store::Transaction& tx) -> core::Result<int64_t> {
    return tx.Exec(
        "UPDATE instances SET status = 'unknown', status_reason = 'host not heard from' WHERE "
        "deleted_at IS NULL AND desired = 'running' AND status NOT IN ('failed', 'unknown') AND "
        "id IN (SELECT p.instance_id FROM placements p JOIN hosts h ON h.id = p.host_id WHERE "
        "h.last_seen_at IS NULL OR h.last_seen_at < ?)",
        {since});
  });
}

}  // namespace gpuwerk::sched
