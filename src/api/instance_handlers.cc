// /api/v1/instances and /api/v1/gpu-types: a person's instances, each call
// scoped to the caller (another person's instance is not_found); /api/v1/admin/gpu-types: GPU
// types as operator-managed data (R-7, issue 5).
#include <algorithm>
#include <limits>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"

namespace gpuwerk::api {

nlohmann::json InstanceJson(const sched::Instance& in, const SshCommandFormat& ssh) {
  nlohmann::json j = {
      {"id", in.id},
      {"name", in.name},
      {"status", std::string(sched::ToString(in.status))},
      {"status_reason", in.status_reason},
      {"hostname", in.hostname},
      {"gpu_type", in.gpu_type},
      {"restart_generation", in.restart_generation},
      {"ssh_key",
       {{"id", in.ssh_key_id}, {"name", in.ssh_key_name}, {"fingerprint", in.ssh_key_fingerprint}}},
      {"hosts", in.hosts},
      {"ssh", nullptr},
      {"ssh_command", nullptr},
      {"billing_session",
       {{"id", in.billing_session_id}, {"started_at", core::FormatRfc3339(in.billing_started_at)}}},
      {"created_at", core::FormatRfc3339(in.created_at)}};
  if (auto target = ssh.TargetFor(in)) {
    j["ssh"] = {{"host", target->host}, {"port", target->port}, {"user", target->user}};
    j["ssh_command"] = ssh.For(in);
  }
  if (!in.nodes.empty()) {
    j["nodes"] = nlohmann::json::array();
    for (const auto& n : in.nodes) {
      j["nodes"].push_back({{"index", n.index},
                            {"host", n.host},
                            {"status", std::string(sched::ToString(n.status))}});
    }
  }
  if (!in.gpu_attached) j["gpu"] = "no GPU attached";
  if (in.deleted_at) j["deleted_at"] = core::FormatRfc3339(*in.deleted_at);
  if (in.drift) {
    j["drift"] = {{"kind", in.drift->kind},
                  {"reason", in.drift->reason},
                  {"at", core::FormatRfc3339(in.drift->at)},
                  {"count", in.drift->count}};
  }
  return j;
}

namespace {

/// What a create of a type that is not online answers (202): the queue entry it joined.
nlohmann::json QueuedJson(const sched::QueueEntry& e) {
  nlohmann::json j = QueueEntryJson(e);
  j["queued"] = true;
  return j;
}

nlohmann::json GpuTypeJson(const sched::GpuType& t) {
  return {{"name", t.name},
          {"description", t.description},
          {"hosts_per_instance", t.hosts_per_instance},
          {"price", {{"amount_minor", t.price_minor_per_hour}, {"currency", t.currency}}},
          {"free_capacity", t.free_instances},
          {"online", t.online},
          {"online_hosts", t.online_hosts},
          {"queued", t.queued}};
}

/// The operator's view: the public one plus registered hosts and linked pairs.
nlohmann::json AdminGpuTypeJson(const sched::GpuType& t) {
  nlohmann::json j = GpuTypeJson(t);
  j["hosts"] = t.hosts;
  j["pairs"] = t.pairs;
  return j;
}

/// The body of PUT /api/v1/admin/gpu-types/{name}: only the known fields, each optional.
core::Result<sched::GpuTypeChange> GpuTypeChangeFrom(const nlohmann::json& body) {
  for (const auto& [key, value] : body.items()) {
    if (key != "description" && key != "hosts_per_instance" && key != "price_minor_per_hour" &&
        key != "currency") {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                    "unknown field '" + key +
                                        "'; a GPU type has description, hosts_per_instance, "
                                        "price_minor_per_hour and currency")
                            .WithDetail("field", key));
    }
  }
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                    key + " must not be null; leave it out to keep its value")
                            .WithDetail("field", key));
    }
  }
  sched::GpuTypeChange change;
  // Lengths and characters are the GPU type's own rules (invalid_description, invalid_currency);
  // the body limit bounds what is read here.
  constexpr size_t kAnyLength = 1024 * 1024;
  GPUWERK_ASSIGN_OR_RETURN(change.description, OptionalString(body, "description", kAnyLength, 0));
  GPUWERK_ASSIGN_OR_RETURN(change.currency, OptionalString(body, "currency", kAnyLength, 0));
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (const char* field : {"hosts_per_instance", "price_minor_per_hour"}) {
    if (!body.contains(field)) continue;
    const bool hosts = std::string_view(field) == "hosts_per_instance";
    if (!body[field].is_number_integer()) {
      return core::InvalidArgument(
          hosts ? "invalid_hosts_per_instance" : "invalid_price",
          hosts ? "hosts_per_instance must be 1 or 2."
                : "price_minor_per_hour must be a whole number of minor units per hour.");
    }
    GPUWERK_ASSIGN_OR_RETURN(int64_t v, RequireInt(body, field, kMin, kMax));
    (std::string_view(field) == "hosts_per_instance" ? change.hosts_per_instance
                                                     : change.price_minor_per_hour) = v;
  }
  return change;
}

}  // namespace

namespace handlers {

Answer ListInstances(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto list, ctx.instances.List(call.who.person_id, page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& in : list.items) items.push_back(InstanceJson(in, ctx.ssh_command));
  return Response::Json(
      200, {{"items", items}, {"page", list.page}, {"pages", list.pages}, {"total", list.total}});
}

Answer CreateInstance(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body,
                           ParseJsonObject(call.req, {"name", "ssh_key_id", "gpu_type"}));
  GPUWERK_ASSIGN_OR_RETURN(auto name, RequireString(body, "name", kInstanceNameReadLimit, 0));
  GPUWERK_ASSIGN_OR_RETURN(auto key, RequireString(body, "ssh_key_id", 256));
  GPUWERK_ASSIGN_OR_RETURN(auto type, OptionalString(body, "gpu_type", 256));
  const std::string gpu_type = type.value_or("spark-1x");
  const std::string& person_id = call.who.person_id;
  const std::string& source = call.req.remote_address;
  return IdempotentCreate(ctx, call, [&](const RecordAnswer& record) -> Answer {
    sched::InstanceService::InTransaction record_instance;
    sched::QueueService::InTransaction record_entry;
    if (record) {
      record_instance = [&](store::Transaction& tx, const sched::Instance& in) {
        return record(tx, 201, InstanceJson(in, ctx.ssh_command));
      };
      record_entry = [&](store::Transaction& tx, const sched::QueueEntry& e) {
        return record(tx, 202, QueuedJson(e));
      };
    }
    // Issue 5: choosing a type that is not online enters its queue directly (202).
    GPUWERK_ASSIGN_OR_RETURN(
        auto done, ctx.instances.CreateOrJoinQueue(ctx.queue, person_id, name, key, gpu_type,
                                                   source, record_instance, record_entry));
    if (done.queue_entry) {
      if (ctx.events) ctx.events->Wake();  // the joiner's streams show the entry
      return Response::Json(202, QueuedJson(*done.queue_entry));
    }
    return Response::Json(201, InstanceJson(*done.instance, ctx.ssh_command));
  });
}

Answer GetInstance(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto in,
                           ctx.instances.Get(call.who.person_id, call.req.PathParam("id")));
  return Response::Json(200, InstanceJson(in, ctx.ssh_command));
}

Answer RestartInstance(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto in,
      ctx.instances.Restart(call.who.person_id, call.req.PathParam("id"), call.req.remote_address));
  return Response::Json(202, InstanceJson(in, ctx.ssh_command));
}

Answer DeleteInstance(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(
      ctx.instances.Delete(call.who.person_id, call.req.PathParam("id"), call.req.remote_address));
  return Response::NoContent();
}

Answer ListGpuTypes(ApiContext& ctx, Call&) {
  GPUWERK_ASSIGN_OR_RETURN(auto types, ctx.instances.GpuTypes());
  nlohmann::json items = nlohmann::json::array();
  for (const auto& t : types) items.push_back(GpuTypeJson(t));
  return Response::Json(200, {{"items", items}});
}

Answer AdminListGpuTypes(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto types, ctx.instances.GpuTypesPage(page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& t : types.items) items.push_back(AdminGpuTypeJson(t));
  return Response::Json(
      200,
      {{"items", items}, {"page", types.page}, {"pages", types.pages}, {"total", types.total}});
}

// Creates or changes a GPU type; fields left out keep their value (docs/api.md).
Answer AdminPutGpuType(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body,
                           ParseJsonObject(call.req, {"description", "hosts_per_instance",
                                                      "price_minor_per_hour", "currency"}));
  GPUWERK_ASSIGN_OR_RETURN(auto change, GpuTypeChangeFrom(body));
  const std::string name = call.req.PathParam("name");
  GPUWERK_ASSIGN_OR_RETURN(
      auto set, ctx.hosts.SetGpuType(call.who.person_id, name, change, call.req.remote_address));
  GPUWERK_ASSIGN_OR_RETURN(auto types, ctx.instances.GpuTypes());
  for (const auto& t : types) {
    if (t.name == name) return Response::Json(set.second ? 201 : 200, AdminGpuTypeJson(t));
  }
  return core::NotFound("GPU type");
}

}  // namespace handlers
}  // namespace gpuwerk::api
