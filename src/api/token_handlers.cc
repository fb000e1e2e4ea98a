// /api/v1/tokens: personal API tokens; the secret is in the create answer only.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/router.h"

namespace gpuwerk::api {
namespace {

nlohmann::json TokenJson(const auth::ApiToken& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"prefix", t.prefix},
          {"created_at", core::FormatRfc3339(t.created_at)},
          {"last_used_at", t.last_used_at ? nlohmann::json(core::FormatRfc3339(*t.last_used_at))
                                          : nlohmann::json()}};
}

}  // namespace

void RegisterTokenRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/tokens", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto list = ctx.accounts.ListApiTokens(who);
      if (!list) return ErrorResponse(list.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& t : *list) items.push_back(TokenJson(t));
      const auto total = static_cast<int64_t>(items.size());
      return Response::Json(200, {{"items", items}, {"page", 1}, {"pages", 1}, {"total", total}});
    });
  });

  router.Add("POST", "/api/v1/tokens", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto name = RequireString(body, "name", 256, 0);
        if (!name) return ErrorResponse(name.error());
        auto created = ctx.accounts.CreateApiToken(who, *name, Authenticator::CallerOf(req));
        if (!created) return ErrorResponse(created.error());
        nlohmann::json j = TokenJson(created->first);
        j["token"] = created->second;
        return Response::Json(201, j);
      });
    });
  });

  router.Add("DELETE", "/api/v1/tokens/{id}", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto r = ctx.accounts.DeleteApiToken(who, req.PathParam("id"), Authenticator::CallerOf(req));
      if (!r) return ErrorResponse(r.error());
      return Response::NoContent();
    });
  });
}

}  // namespace gpuwerk::api
