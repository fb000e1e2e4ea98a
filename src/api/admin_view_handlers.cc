// The operator's views of everyone (docs/api.md "Operators: people, instances, queues"):
// GET /api/v1/admin/instances (everyone's instances, keyset paged, by status and host),
// GET /api/v1/admin/queue (every open queue entry, by GPU type in queue order),
// GET /api/v1/admin/people (keyset paged), PUT|DELETE /api/v1/admin/people/{email}/operator (the
// operator flag, audited; the last operator's stays) and GET /api/v1/admin/sign-up-policy (the
// server's configuration, read only).
#include <string>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "auth/person_table.h"
#include "billing/billing_session_table.h"
#include "sched/states.h"
#include "teams/team_member_table.h"
#include "teams/team_table.h"

namespace gpuwerk::api::handlers {
namespace {

/// The query parameter `name` ("" when absent). Errors: invalid_query above `max` characters.
core::Result<std::string> QueryText(const Request& req, const char* name, size_t max = 256) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return std::string();
  if (it->second.size() > max) {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                                  std::string(name) + " is too long.")
                          .WithDetail("parameter", name));
  }
  return it->second;
}

/// A keyset page's members besides `items`: page, pages, total and the cursors present.
template <class P>
nlohmann::json KeysetPageJson(const P& page, nlohmann::json items) {
  nlohmann::json j = {{"items", std::move(items)},
                      {"page", page.page},
                      {"pages", page.pages},
                      {"total", page.total}};
  if (!page.next.empty()) j["next"] = page.next;
  if (!page.prev.empty()) j["prev"] = page.prev;
  return j;
}

/// `{id, name}` of team `team_id`, or null when it is gone.
core::Result<nlohmann::json> TeamRef(store::Transaction& tx, const std::string& team_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto team, teams::TeamTable::Find(tx, team_id));
  if (!team) return nlohmann::json(nullptr);
  return nlohmann::json{{"id", team->id}, {"name", team->name}};
}

/// The team that pays for billing session `session_id` (`{id, name}`), or null for a solo one.
core::Result<nlohmann::json> PayingTeam(store::Transaction& tx, const std::string& session_id) {
  if (session_id.empty()) return nlohmann::json(nullptr);
  GPUWERK_ASSIGN_OR_RETURN(auto session, billing::BillingSessionTable::Find(tx, session_id));
  if (!session || session->billing_account_id.rfind("team_", 0) != 0) {
    return nlohmann::json(nullptr);
  }
  return TeamRef(tx, session->billing_account_id);
}

nlohmann::json PersonJson(const auth::Person& p, nlohmann::json team) {
  return {{"id", p.id},
          {"email", p.email},
          {"is_operator", p.is_operator},
          {"email_proven", p.email_proven_at.has_value()},
          {"created_at", core::FormatRfc3339(p.created_at)},
          {"team", std::move(team)}};
}

const char* PolicyName(auth::SignUpPolicy p) {
  switch (p) {
    case auth::SignUpPolicy::kOpen:
      return "open";
    case auth::SignUpPolicy::kDomains:
      return "domains";
    case auth::SignUpPolicy::kInvite:
      return "invite";
  }
  return "open";
}

/// PUT (true) or DELETE (false) of /api/v1/admin/people/{email}/operator.
Answer SetOperatorFlag(ApiContext& ctx, Call& call, bool is_operator) {
  GPUWERK_ASSIGN_OR_RETURN(
      auth::Person person,
      ctx.accounts.SetOperator(call.who, call.req.PathParam("email"), is_operator,
                               auth::Caller{.address = call.req.remote_address}));
  GPUWERK_ASSIGN_OR_RETURN(
      nlohmann::json team, ctx.db.Read([&](store::Transaction& tx) -> core::Result<nlohmann::json> {
        GPUWERK_ASSIGN_OR_RETURN(auto m, teams::TeamMemberTable::ActiveOf(tx, person.id));
        if (!m) return nlohmann::json(nullptr);
        return TeamRef(tx, m->team_id);
      }));
  return Response::Json(200, PersonJson(person, std::move(team)));
}

}  // namespace

Answer AdminListInstances(ApiContext& ctx, Call& call) {
  sched::InstanceFilter filter;
  GPUWERK_ASSIGN_OR_RETURN(std::string status, QueryText(call.req, "status"));
  GPUWERK_ASSIGN_OR_RETURN(filter.host, QueryText(call.req, "host"));
  GPUWERK_ASSIGN_OR_RETURN(std::string deleted, QueryText(call.req, "deleted"));
  if (!status.empty()) {
    if (!sched::InstanceStatusFrom(status)) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_status",
                                    "status must be one of provisioning, running, restarting, "
                                    "exited, unknown, deleting, failed, deleted.")
                            .WithDetail("parameter", "status"));
    }
    filter.status = status;
  }
  if (!deleted.empty() && deleted != "true" && deleted != "false") {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                                  "deleted must be true or false.")
                          .WithDetail("parameter", "deleted"));
  }
  filter.include_deleted = deleted == "true" || status == "deleted";
  GPUWERK_ASSIGN_OR_RETURN(std::string before, QueryText(call.req, "before"));
  GPUWERK_ASSIGN_OR_RETURN(std::string after, QueryText(call.req, "after"));
  GPUWERK_ASSIGN_OR_RETURN(auto page, ctx.instances.ListAll(filter, before, after));
  GPUWERK_ASSIGN_OR_RETURN(
      nlohmann::json items,
      ctx.db.Read([&](store::Transaction& tx) -> core::Result<nlohmann::json> {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& [person_id, in] : page.items) {
          GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, person_id));
          GPUWERK_ASSIGN_OR_RETURN(nlohmann::json team, PayingTeam(tx, in.billing_session_id));
          nlohmann::json j = {{"id", in.id},
                              {"name", in.name},
                              {"hostname", in.hostname},
                              {"gpu_type", in.gpu_type},
                              {"hosts", in.hosts},
                              {"desired", std::string(sched::ToString(in.desired))},
                              {"status", std::string(sched::ToString(in.status))},
                              {"status_reason", in.status_reason},
                              {"owner", {{"id", person_id}, {"email", email.value_or("")}}},
                              {"team", std::move(team)},
                              {"billing_session_id", in.billing_session_id},
                              {"created_at", core::FormatRfc3339(in.created_at)},
                              {"deleted_at", nullptr}};
          if (in.deleted_at) j["deleted_at"] = core::FormatRfc3339(*in.deleted_at);
          out.push_back(std::move(j));
        }
        return out;
      }));
  return Response::Json(200, KeysetPageJson(page, std::move(items)));
}

Answer AdminListQueue(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(std::string gpu_type, QueryText(call.req, "gpu_type"));
  GPUWERK_ASSIGN_OR_RETURN(auto entries, ctx.queue.ListAllOpen(gpu_type, page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& e : entries.items) {
    nlohmann::json j = QueueEntryJson(e.entry);
    j["owner"] = {{"id", e.person_id}, {"email", e.email}};
    items.push_back(std::move(j));
  }
  return Response::Json(200, {{"items", std::move(items)},
                              {"page", entries.page},
                              {"pages", entries.pages},
                              {"total", entries.total}});
}

Answer AdminListPeople(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(std::string before, QueryText(call.req, "before"));
  GPUWERK_ASSIGN_OR_RETURN(std::string after, QueryText(call.req, "after"));
  GPUWERK_ASSIGN_OR_RETURN(auth::PersonPage page, ctx.accounts.ListPeople(before, after));
  GPUWERK_ASSIGN_OR_RETURN(nlohmann::json items,
                           ctx.db.Read([&](store::Transaction& tx) -> core::Result<nlohmann::json> {
                             nlohmann::json out = nlohmann::json::array();
                             for (const auto& p : page.items) {
                               GPUWERK_ASSIGN_OR_RETURN(auto m,
                                                        teams::TeamMemberTable::ActiveOf(tx, p.id));
                               nlohmann::json team = nullptr;
                               if (m) {
                                 GPUWERK_ASSIGN_OR_RETURN(team, TeamRef(tx, m->team_id));
                                 if (!team.is_null())
                                   team["role"] = std::string(teams::RoleName(m->role));
                               }
                               out.push_back(PersonJson(p, std::move(team)));
                             }
                             return out;
                           }));
  return Response::Json(200, KeysetPageJson(page, std::move(items)));
}

Answer AdminSetOperator(ApiContext& ctx, Call& call) { return SetOperatorFlag(ctx, call, true); }
Answer AdminClearOperator(ApiContext& ctx, Call& call) { return SetOperatorFlag(ctx, call, false); }

Answer AdminSignUpPolicy(ApiContext& ctx, Call& /*call*/) {
  return Response::Json(200, {{"policy", PolicyName(ctx.accounts.sign_up_policy())},
                              {"domains", ctx.accounts.sign_up_domains()},
                              {"source", "configuration"}});
}

}  // namespace gpuwerk::api::handlers
