// /api/v1/ssh-keys and an operator's /api/v1/admin/ssh-keys/release. The posted key
// text is never logged or echoed back.
#include <limits>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "api/json_writer.h"
#include "keys/sshsig.h"

namespace gpuwerk::api::handlers {
namespace {

/// A key as the API shows it, written straight to `w` (a hot route: no json tree). Members in
/// sorted order, as Response::Json writes them.
void WriteKey(JsonWriter& w, const keys::SshKey& k) {
  w.BeginObject()
      .Member("bits", k.bits)
      .Member("created_at", core::FormatRfc3339(k.created_at))
      .Member("fingerprint", k.fingerprint)
      .Member("id", k.id)
      .Member("name", k.name)
      .Member("public_key", k.public_key)
      .Member("type", k.type)
      .EndObject();
}

}  // namespace

Answer ListSshKeys(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  // A Tx::kOneRead route: the page is read in the transaction the caller was authenticated in.
  GPUWERK_ASSIGN_OR_RETURN(auto list, call.tx
                                          ? ctx.ssh_keys.List(*call.tx, call.who.person_id, page)
                                          : ctx.ssh_keys.List(call.who.person_id, page));
  return JsonPage(list.items, list.page, list.pages, list.total, WriteKey);
}

Answer AddSshKey(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"name", "public_key"}));
  GPUWERK_ASSIGN_OR_RETURN(auto name,
                           RequireString(body, "name", std::numeric_limits<size_t>::max(), 0));
  GPUWERK_ASSIGN_OR_RETURN(auto text, RequireString(body, "public_key", 64 * 1024));
  GPUWERK_ASSIGN_OR_RETURN(
      auto key, ctx.ssh_keys.Add(call.who.person_id, name, text, call.req.remote_address));
  JsonWriter w;
  WriteKey(w, key);
  return Response::JsonText(201, w.Take());
}

Answer SshKeyClaimChallenge(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"public_key"}));
  GPUWERK_ASSIGN_OR_RETURN(auto text, RequireString(body, "public_key", 64 * 1024));
  GPUWERK_ASSIGN_OR_RETURN(auto issued, ctx.ssh_keys.IssueClaimChallenge(call.who.person_id, text));
  return Response::Json(201, {{"challenge", issued.challenge},
                              {"namespace", keys::kKeyClaimNamespace},
                              {"fingerprint", issued.fingerprint},
                              {"expires_at", core::FormatRfc3339(issued.expires_at)}});
}

Answer ClaimSshKey(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto body, ParseJsonObject(call.req, {"name", "public_key", "challenge", "signature"}));
  GPUWERK_ASSIGN_OR_RETURN(auto name,
                           RequireString(body, "name", std::numeric_limits<size_t>::max(), 0));
  GPUWERK_ASSIGN_OR_RETURN(auto text, RequireString(body, "public_key", 64 * 1024));
  GPUWERK_ASSIGN_OR_RETURN(auto challenge, RequireString(body, "challenge", 1024));
  GPUWERK_ASSIGN_OR_RETURN(auto signature,
                           RequireString(body, "signature", keys::kMaxArmoredSignature));
  GPUWERK_ASSIGN_OR_RETURN(auto claimed,
                           ctx.ssh_keys.Claim(call.who.person_id, name, text, challenge, signature,
                                              call.req.remote_address));
  JsonWriter w;
  WriteKey(w, claimed.key);
  nlohmann::json answer = nlohmann::json::parse(w.Take());
  answer["proven"] = true;
  answer["taken_over"] = claimed.taken_over;
  return Response::Json(claimed.already_owned ? 200 : 201, answer);
}

Answer DeleteSshKey(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(
      ctx.ssh_keys.Delete(call.who.person_id, call.req.PathParam("id"), call.req.remote_address));
  return Response::NoContent();
}

Answer AdminReleaseSshKey(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"public_key"}));
  GPUWERK_ASSIGN_OR_RETURN(auto text, RequireString(body, "public_key", 64 * 1024));
  GPUWERK_ASSIGN_OR_RETURN(auto key,
                           ctx.ssh_keys.Release(call.who.person_id, text, call.req.remote_address));
  return Response::Json(200, {{"fingerprint", key.fingerprint},
                              {"type", key.type},
                              {"bits", key.bits},
                              {"name", key.name},
                              {"former_owner_id", key.person_id}});
}

}  // namespace gpuwerk::api::handlers
