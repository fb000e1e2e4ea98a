// /api/v1/ssh-keys. The posted key text is never logged or echoed back.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/router.h"

namespace gpuwerk::api {
namespace {

nlohmann::json KeyJson(const keys::SshKey& k) {
  return {{"id", k.id},
          {"name", k.name},
          {"type", k.type},
          {"bits", k.bits},
          {"fingerprint", k.fingerprint},
          {"public_key", k.public_key},
          {"created_at", core::FormatRfc3339(k.created_at)}};
}

}  // namespace

void RegisterSshKeyRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/ssh-keys", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto page = PageParam(req);
      if (!page) return ErrorResponse(page.error());
      auto list = ctx.ssh_keys.List(who.person_id, *page);
      if (!list) return ErrorResponse(list.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& k : list->items) items.push_back(KeyJson(k));
      return Response::Json(
          200,
          {{"items", items}, {"page", list->page}, {"pages", list->pages}, {"total", list->total}});
    });
  });

  router.Add("POST", "/api/v1/ssh-keys", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto name = RequireString(body, "name", 256, 0);
        if (!name) return ErrorResponse(name.error());
        auto text = RequireString(body, "public_key", 64 * 1024);
        if (!text) return ErrorResponse(text.error());
        auto key = ctx.ssh_keys.Add(who.person_id, *name, *text, req.remote_address);
        if (!key) return ErrorResponse(key.error());
        return Response::Json(201, KeyJson(*key));
      });
    });
  });

  router.Add("DELETE", "/api/v1/ssh-keys/{id}", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto r = ctx.ssh_keys.Delete(who.person_id, req.PathParam("id"), req.remote_address);
      if (!r) return ErrorResponse(r.error());
      return Response::NoContent();
    });
  });
}

}  // namespace gpuwerk::api
