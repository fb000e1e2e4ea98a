// /api/v1/instances and /api/v1/gpu-types: a person's instances, each call
// scoped to the caller (another person's instance is not_found); /api/v1/admin/gpu-types: GPU
// types as operator-managed data (R-7, issue 5).
#include <algorithm>
#include <limits>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/idempotency.h"
#include "api/router.h"

namespace gpuwerk::api {

nlohmann::json InstanceJson(const sched::Instance& in, const SshCommandFormat& ssh) {
  nlohmann::json j = {
      {"id", in.id},
      {"name", in.name},
      {"status", in.status},
      {"status_reason", in.status_reason},
      {"hostname", in.hostname},
      {"gpu_type", in.gpu_type},
      {"restart_generation", in.restart_generation},
      {"ssh_key",
       {{"id", in.ssh_key_id}, {"name", in.ssh_key_name}, {"fingerprint", in.ssh_key_fingerprint}}},
      {"hosts", in.hosts},
      {"ssh_command", nullptr},
      {"billing_session",
       {{"id", in.billing_session_id}, {"started_at", core::FormatRfc3339(in.billing_started_at)}}},
      {"created_at", core::FormatRfc3339(in.created_at)}};
  if (std::string command = ssh.For(in); !command.empty()) j["ssh_command"] = command;
  if (!in.gpu_attached) j["gpu"] = "no GPU attached";
  if (in.deleted_at) j["deleted_at"] = core::FormatRfc3339(*in.deleted_at);
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

/// Authenticates a person who must be an operator.
template <class Fn>
Response AsOperator(ApiContext& ctx, Request& req, Fn&& fn) {
  return Authenticated(ctx, req, [&](const auth::Principal& who) {
    if (!who.is_operator) {
      return ErrorResponse(core::Error(core::ErrorCode::kPermissionDenied, "forbidden",
                                       "Only operators may do this."));
    }
    return fn(who);
  });
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

void RegisterInstanceRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/instances", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto page = PageParam(req);
      if (!page) return ErrorResponse(page.error());
      auto list = ctx.instances.List(who.person_id, *page);
      if (!list) return ErrorResponse(list.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& in : list->items) items.push_back(InstanceJson(in, ctx.ssh_command));
      return Response::Json(
          200,
          {{"items", items}, {"page", list->page}, {"pages", list->pages}, {"total", list->total}});
    });
  });

  router.Add("POST", "/api/v1/instances", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto name = RequireString(body, "name", 256, 0);
        if (!name) return ErrorResponse(name.error());
        auto key = RequireString(body, "ssh_key_id", 256);
        if (!key) return ErrorResponse(key.error());
        auto type = OptionalString(body, "gpu_type", 256);
        if (!type) return ErrorResponse(type.error());
        // Idempotency-Key (docs/queue.md): the first answer again, nothing created twice.
        auto idem = IdempotencyKeys::KeyOf(req);
        if (!idem) return ErrorResponse(idem.error());
        const std::string hash = IdempotencyKeys::RequestHash(req);
        if (!idem->empty()) {
          auto replay = ctx.idempotency.Replay(who.person_id, *idem, hash);
          if (!replay) return ErrorResponse(replay.error());
          if (*replay) return std::move(**replay);
        }
        sched::InstanceService::InTransaction record;
        sched::QueueService::InTransaction record_entry;
        if (!idem->empty()) {
          record = [&](store::Transaction& tx, const sched::Instance& in) {
            return ctx.idempotency.Record(tx, who.person_id, *idem, hash, 201,
                                          InstanceJson(in, ctx.ssh_command).dump());
          };
          record_entry = [&](store::Transaction& tx, const sched::QueueEntry& e) {
            return ctx.idempotency.Record(tx, who.person_id, *idem, hash, 202,
                                          QueuedJson(e).dump());
          };
        }
        // Issue 5: choosing a type that is not online enters its queue directly (202).
        auto done = ctx.instances.CreateOrJoinQueue(ctx.queue, who.person_id, *name, *key,
                                                    type->value_or("spark-1x"), req.remote_address,
                                                    record, record_entry);
        // A concurrent request with the same key committed first: this one failed on its
        // record, or on what the first one created (the name, the host). Answer the first's.
        if (!done && !idem->empty()) {
          auto replay = ctx.idempotency.Replay(who.person_id, *idem, hash);
          if (!replay) return ErrorResponse(replay.error());
          if (*replay) return std::move(**replay);
        }
        if (!done) return ErrorResponse(done.error());
        if (done->queue_entry) {
          if (ctx.events) ctx.events->Wake();  // the joiner's streams show the entry
          return Response::Json(202, QueuedJson(*done->queue_entry));
        }
        return Response::Json(201, InstanceJson(*done->instance, ctx.ssh_command));
      });
    });
  });

  router.Add("GET", "/api/v1/instances/{id}", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto in = ctx.instances.Get(who.person_id, req.PathParam("id"));
      if (!in) return ErrorResponse(in.error());
      return Response::Json(200, InstanceJson(*in, ctx.ssh_command));
    });
  });

  router.Add("POST", "/api/v1/instances/{id}/restart", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto in = ctx.instances.Restart(who.person_id, req.PathParam("id"), req.remote_address);
      if (!in) return ErrorResponse(in.error());
      return Response::Json(202, InstanceJson(*in, ctx.ssh_command));
    });
  });

  router.Add("DELETE", "/api/v1/instances/{id}", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto in = ctx.instances.Delete(who.person_id, req.PathParam("id"), req.remote_address);
      if (!in) return ErrorResponse(in.error());
      return Response::NoContent();
    });
  });

  router.Add("GET", "/api/v1/gpu-types", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal&) {
      auto types = ctx.instances.GpuTypes();
      if (!types) return ErrorResponse(types.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& t : *types) items.push_back(GpuTypeJson(t));
      return Response::Json(200, {{"items", items}});
    });
  });

  router.Add("GET", "/api/v1/admin/gpu-types", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal&) {
      auto page = PageParam(req);
      if (!page) return ErrorResponse(page.error());
      auto types = ctx.instances.GpuTypesPage(*page);
      if (!types) return ErrorResponse(types.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& t : types->items) items.push_back(AdminGpuTypeJson(t));
      return Response::Json(200, {{"items", items},
                                  {"page", types->page},
                                  {"pages", types->pages},
                                  {"total", types->total}});
    });
  });

  // Creates or changes a GPU type; fields left out keep their value (docs/api.md).
  router.Add("PUT", "/api/v1/admin/gpu-types/{name}", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal& who) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto change = GpuTypeChangeFrom(body);
        if (!change) return ErrorResponse(change.error());
        const std::string& name = req.path_params["name"];
        auto set = ctx.hosts.SetGpuType(who.person_id, name, *change, req.remote_address);
        if (!set) return ErrorResponse(set.error());
        auto types = ctx.instances.GpuTypes();
        if (!types) return ErrorResponse(types.error());
        for (const auto& t : *types) {
          if (t.name == name) return Response::Json(set->second ? 201 : 200, AdminGpuTypeJson(t));
        }
        return ErrorResponse(core::NotFound("GPU type").error());
      });
    });
  });
}

}  // namespace gpuwerk::api
