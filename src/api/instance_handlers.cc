// /api/v1/instances and /api/v1/gpu-types: a person's instances, each call
// scoped to the caller (another person's instance is not_found).
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/idempotency.h"
#include "api/router.h"

namespace gpuwerk::api {
namespace {

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
        if (!idem->empty()) {
          record = [&](store::Transaction& tx, const sched::Instance& in) {
            return ctx.idempotency.Record(tx, who.person_id, *idem, hash, 201,
                                          InstanceJson(in, ctx.ssh_command).dump());
          };
        }
        auto in = ctx.instances.Create(who.person_id, *name, *key, type->value_or("spark-1x"),
                                       req.remote_address, record);
        // A concurrent request with the same key committed first: this one failed on its
        // record, or on what the first one created (the name, the host). Answer the first's.
        if (!in && !idem->empty()) {
          auto replay = ctx.idempotency.Replay(who.person_id, *idem, hash);
          if (!replay) return ErrorResponse(replay.error());
          if (*replay) return std::move(**replay);
        }
        if (!in) return ErrorResponse(in.error());
        return Response::Json(201, InstanceJson(*in, ctx.ssh_command));
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
      for (const auto& t : *types) {
        items.push_back(
            {{"name", t.name},
             {"description", t.description},
             {"hosts_per_instance", t.hosts_per_instance},
             {"price", {{"amount_minor", t.price_minor_per_hour}, {"currency", t.currency}}},
             {"free_capacity", t.free_instances},
             {"online", t.online_hosts > 0},
             {"online_hosts", t.online_hosts},
             {"queued", t.queued}});
      }
      return Response::Json(200, {{"items", items}});
    });
  });
}

}  // namespace gpuwerk::api
