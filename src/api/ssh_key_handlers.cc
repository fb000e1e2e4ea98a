// /api/v1/ssh-keys. The posted key text is never logged or echoed back.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"

namespace gpuwerk::api::handlers {
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

Answer ListSshKeys(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto list, ctx.ssh_keys.List(call.who.person_id, page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& k : list.items) items.push_back(KeyJson(k));
  return Response::Json(
      200, {{"items", items}, {"page", list.page}, {"pages", list.pages}, {"total", list.total}});
}

Answer AddSshKey(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto name, RequireString(body, "name", 256, 0));
  GPUWERK_ASSIGN_OR_RETURN(auto text, RequireString(body, "public_key", 64 * 1024));
  GPUWERK_ASSIGN_OR_RETURN(
      auto key, ctx.ssh_keys.Add(call.who.person_id, name, text, call.req.remote_address));
  return Response::Json(201, KeyJson(key));
}

Answer DeleteSshKey(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(
      ctx.ssh_keys.Delete(call.who.person_id, call.req.PathParam("id"), call.req.remote_address));
  return Response::NoContent();
}

}  // namespace gpuwerk::api::handlers
