// /api/v1/tokens: personal API tokens; the secret is in the create answer only.
#include <limits>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"

namespace gpuwerk::api::handlers {
namespace {

nlohmann::json TokenJson(const auth::ApiToken& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"prefix", t.prefix},
          {"created_at", core::FormatRfc3339(t.created_at)},
          {"last_used_at", t.last_used_at ? nlohmann::json(core::FormatRfc3339(*t.last_used_at))
                                          : nlohmann::json()},
          {"expires_at",
           t.expires_at ? nlohmann::json(core::FormatRfc3339(*t.expires_at)) : nlohmann::json()}};
}

}  // namespace

Answer ListTokens(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto list, ctx.accounts.ListApiTokens(call.who));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& t : list) items.push_back(TokenJson(t));
  const auto total = static_cast<int64_t>(items.size());
  return Response::Json(200, {{"items", items}, {"page", 1}, {"pages", 1}, {"total", total}});
}

Answer CreateToken(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"name", "expires_at"}));
  // No bound of its own (the body limit bounds it): the token-name rule (1 to 64 characters)
  // names the error, never a second, larger number.
  GPUWERK_ASSIGN_OR_RETURN(auto name,
                           RequireString(body, "name", std::numeric_limits<size_t>::max(), 0));
  // expires_at: optional, RFC 3339; absent or null: the token does not expire.
  GPUWERK_ASSIGN_OR_RETURN(auto expires_text, OptionalString(body, "expires_at", 64));
  std::optional<int64_t> expires_at;
  if (expires_text) {
    expires_at = core::ParseRfc3339(*expires_text);
    if (!expires_at) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_expiry",
                                    "expires_at must be an RFC 3339 UTC time no later than "
                                    "2200-12-31T23:59:59Z, e.g. 2027-01-31T00:00:00Z; leave it "
                                    "out for a token that does not expire.")
                            .WithDetail("field", "expires_at"));
    }
  }
  GPUWERK_ASSIGN_OR_RETURN(
      auto created,
      ctx.accounts.CreateApiToken(call.who, name, expires_at, Authenticator::CallerOf(call.req)));
  nlohmann::json j = TokenJson(created.first);
  j["token"] = created.second;
  return Response::Json(201, j);
}

Answer DeleteToken(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.accounts.DeleteApiToken(call.who, call.req.PathParam("id"),
                                          Authenticator::CallerOf(call.req)));
  return Response::NoContent();
}

}  // namespace gpuwerk::api::handlers
