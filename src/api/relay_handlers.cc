// /api/v1/relay/authorize: the remote relay's access decision (docs/ssh.md).
#include "api/handler_support.h"
#include "api/relay_routes.h"
#include "api/router.h"
#include "relay/http_relay_authorizer.h"

namespace gpuwerk::api {

void RegisterRelayRoutes(Router& router, ApiContext& ctx, relay::RelayAuthorizer& authorizer) {
  router.Add("POST", "/api/v1/relay/authorize", [&ctx, &authorizer](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      if (!who.is_operator) {
        return ErrorResponse(core::Error(core::ErrorCode::kPermissionDenied, "forbidden",
                                         "Only a relay (an operator's API token) may do this."));
      }
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        relay::AuthorizeRequest r;
        for (auto [field, out] : {std::pair{"user", &r.user},
                                  {"key_type", &r.key_type},
                                  {"public_key", &r.key_blob_base64},
                                  {"fingerprint", &r.key_fingerprint},
                                  {"source_address", &r.source_address}}) {
          auto value = RequireString(body, field, 16 * 1024);
          if (!value) return ErrorResponse(value.error());
          *out = *value;
        }
        auto decision = authorizer.Authorize(r);
        if (!decision) return ErrorResponse(decision.error());
        return Response::Json(200, relay::AuthorizeDecisionJson(*decision));
      });
    });
  });
}

}  // namespace gpuwerk::api
