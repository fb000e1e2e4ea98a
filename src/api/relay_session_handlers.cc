// Relay session lists: an instance's for its owner, everyone's for operators. The rows
// are written by the relays (app::AuditRelaySessionLog in-process, PUT /api/v1/relay/sessions
// from remote relays); see docs/ssh.md.
#include <algorithm>

#include "access/relay_session_records.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "sched/instance_table.h"

namespace gpuwerk::api {
namespace {

nlohmann::json RelaySessionJson(const access::RelaySessionRow& r, int64_t now, bool with_email) {
  const int64_t end = r.ended_at.value_or(now);
  nlohmann::json j = {{"id", r.id},
                      {"relay", r.relay},
                      {"person_id", r.person_id},
                      {"key_fingerprint", r.key_fingerprint},
                      {"instance_id", r.instance_id},
                      {"hostname", r.hostname},
                      {"login", r.login},
                      {"source_address", r.source_address},
                      {"started_at", core::FormatRfc3339(r.started_at)},
                      {"ended_at", nullptr},
                      {"duration_seconds", std::max<int64_t>(0, end - r.started_at)},
                      {"bytes_from_client", r.bytes_from_client},
                      {"bytes_to_client", r.bytes_to_client},
                      {"end_reason", r.end_reason},
                      {"open", !r.ended_at.has_value()}};
  if (r.ended_at) j["ended_at"] = core::FormatRfc3339(*r.ended_at);
  if (with_email) j["email"] = r.person_email;
  return j;
}

Response PageResponse(const access::RelaySessionPage& page, int64_t now, bool with_email) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& r : page.items) items.push_back(RelaySessionJson(r, now, with_email));
  return Response::Json(
      200, {{"items", items}, {"page", page.page}, {"pages", page.pages}, {"total", page.total}});
}

/// The id of the caller's instance named by `id_or_name`: any of their instances by id, deleted
/// ones included (their relay sessions stay listed), else a live one by name.
/// Errors: not_found (also for another person's instance, R-19).
core::Result<std::string> OwnedInstanceId(ApiContext& ctx, const std::string& person_id,
                                          const std::string& id_or_name) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, ctx.db.Read([&](store::Transaction& tx) {
    return sched::InstanceTable::FindOwned(tx, person_id, id_or_name);
  }));
  if (row) return row->id;
  GPUWERK_ASSIGN_OR_RETURN(auto live, ctx.instances.Get(person_id, id_or_name));
  return live.id;
}

}  // namespace

namespace handlers {

Answer ListInstanceRelaySessions(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto id,
                           OwnedInstanceId(ctx, call.who.person_id, call.req.PathParam("id")));
  GPUWERK_ASSIGN_OR_RETURN(auto list, ctx.db.Read([&](store::Transaction& tx) {
    return access::ListRelaySessions(tx, {.instance_id = id, .person_id = ""}, page);
  }));
  return PageResponse(list, ctx.clock.NowUnix(), /*with_email=*/false);
}

Answer AdminListRelaySessions(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  access::RelaySessionFilter filter;
  for (auto [name, out] :
       {std::pair{"instance_id", &filter.instance_id}, {"person_id", &filter.person_id}}) {
    auto it = call.req.query.find(name);
    if (it == call.req.query.end()) continue;
    if (it->second.size() > 256) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                                    std::string(name) + " is too long.")
                            .WithDetail("parameter", name));
    }
    *out = it->second;
  }
  GPUWERK_ASSIGN_OR_RETURN(auto list, ctx.db.Read([&](store::Transaction& tx) {
    return access::ListRelaySessions(tx, filter, page);
  }));
  return PageResponse(list, ctx.clock.NowUnix(), /*with_email=*/true);
}

}  // namespace handlers
}  // namespace gpuwerk::api
