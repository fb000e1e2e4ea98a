// /api/v1/admin/relays (operators only; docs/api.md "Relays", docs/ssh.md "The relay's
// credential"): the relays this server accepts, each by a credential of its own.
//
// - `POST /api/v1/admin/relays` {name}: registers a relay; 201 with the credential and its
//   secret `token` ("gwr_…"), shown only now. Errors: 400 `invalid_name`, `reserved_name`
//   (`local`), `invalid_field`; 409 `name_taken`. Audited `relay_credential.add`.
// - `GET /api/v1/admin/relays?page=N`: the credentials by name, 15 a page (never a secret).
// - `DELETE /api/v1/admin/relays/{name}`: revokes the relay's credential; 204. Its next request
//   gets 401, its watch stream ends at once, and so its open relay sessions end (the relay fails
//   closed on a refused credential). Errors: 404 `not_found`. Audited `relay_credential.revoke`.
#include <limits>

#include "api/handler_support.h"
#include "api/internal/handlers.h"

namespace gpuwerk::api {
namespace {

nlohmann::json RelayCredentialJson(const access::RelayCredential& c) {
  nlohmann::json j = {{"id", c.id},
                      {"name", c.name},
                      {"prefix", c.prefix},
                      {"created_by", nullptr},
                      {"created_at", core::FormatRfc3339(c.created_at)},
                      {"last_used_at", nullptr}};
  if (!c.created_by.empty()) j["created_by"] = c.created_by;
  if (c.last_used_at) j["last_used_at"] = core::FormatRfc3339(*c.last_used_at);
  return j;
}

}  // namespace

namespace handlers {

Answer AdminAddRelay(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"name"}));
  // Any length is read here, so that the credential's own rule (1 to 128 characters) answers
  // every bad name with invalid_name.
  GPUWERK_ASSIGN_OR_RETURN(auto name,
                           RequireString(body, "name", std::numeric_limits<size_t>::max(), 0));
  GPUWERK_ASSIGN_OR_RETURN(
      auto added, ctx.relay_credentials.Add(call.who.person_id, name, call.req.remote_address));
  nlohmann::json j = RelayCredentialJson(added.credential);
  j["token"] = added.secret;  // shown once
  return Response::Json(201, j);
}

Answer AdminListRelays(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto relays, ctx.relay_credentials.List(page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& c : relays.items) items.push_back(RelayCredentialJson(c));
  return Response::Json(200, {{"items", std::move(items)},
                              {"page", relays.page},
                              {"pages", relays.pages},
                              {"total", relays.total}});
}

Answer AdminRevokeRelay(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.relay_credentials.Revoke(call.who.person_id, call.req.PathParam("name"),
                                           call.req.remote_address));
  // The relay's watch stream ends now rather than at its next heartbeat: the relay re-checks
  // every open relay session at once, gets 401, and ends them (docs/ssh.md "Revocation").
  if (ctx.relay_watch) ctx.relay_watch->CheckNow();
  return Response::NoContent();
}

}  // namespace handlers
}  // namespace gpuwerk::api
