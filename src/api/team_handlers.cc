// /api/v1/team: a person's team, its members and invitations (R-15; docs/teams.md), and what an
// invitation link is for (the dashboard's /team/accept page). Every role rule is TeamService's:
// these handlers only read requests and write answers, so the browser, the CLI and API tokens
// meet the same checks.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "billing/money.h"
#include "teams/team_service.h"
#include "teams/team_usage.h"

namespace gpuwerk::api {
namespace {

using nlohmann::json;

/// The team service, or 503 when the server runs without one.
core::Result<teams::TeamService*> Teams(ApiContext& ctx) {
  if (ctx.teams == nullptr) {
    return core::Fail(core::ErrorCode::kUnavailable, "teams_unavailable",
                      "This server does not run teams.");
  }
  return ctx.teams;
}

/// invite_gone answers 410 Gone (docs/teams.md "Invitations"): the link is used up, revoked,
/// replaced or expired for good. Every other error goes to the route table as it is.
core::Result<Response> GoneOr(core::Error error) {
  if (error.api_code == "invite_gone") return Problem(410, error);
  return core::Fail(std::move(error));
}

json MemberJson(const teams::Member& m) {
  return {{"person_id", m.person_id},
          {"email", m.email},
          {"role", teams::RoleName(m.role)},
          {"joined_at", core::FormatRfc3339(m.joined_at)}};
}

json InviteJson(const teams::Invite& i) {
  return {{"id", i.id},
          {"email", i.email},
          {"invited_by", i.invited_by_email},
          {"created_at", core::FormatRfc3339(i.created_at)},
          {"sent_at", core::FormatRfc3339(i.sent_at)},
          {"expires_at", core::FormatRfc3339(i.expires_at)}};
}

/// The team as its caller may see it: owners get `invites`, members get no such member.
json TeamJson(const teams::TeamView& v) {
  json members = json::array();
  for (const auto& m : v.members) members.push_back(MemberJson(m));
  json j = {{"id", v.team.id},
            {"name", v.team.name},
            {"created_at", core::FormatRfc3339(v.team.created_at)},
            {"my_role", teams::RoleName(v.my_role)},
            {"members", std::move(members)}};
  if (v.my_role == teams::Role::kOwner) {
    json invites = json::array();
    for (const auto& i : v.invites) invites.push_back(InviteJson(i));
    j["invites"] = std::move(invites);
  }
  return j;
}

/// GET /api/v1/team/usage's answer (docs/api.md "Teams").
json TeamUsageJson(const teams::TeamUsage& u) {
  json people = json::array();
  for (const teams::PersonUsage& p : u.people) {
    people.push_back({{"person_id", p.person_id},
                      {"label", p.label},
                      {"member", p.member},
                      {"minutes", p.minutes},
                      {"amount_minor", p.amount_minor},
                      {"currency", p.currency},
                      {"amount", billing::FormatAmount(p.amount_minor, p.currency)}});
  }
  json totals = json::array();
  for (const billing::CurrencyTotal& t : u.totals) {
    totals.push_back({{"currency", t.currency},
                      {"amount_minor", t.amount_minor},
                      {"amount", billing::FormatAmount(t.amount_minor, t.currency)}});
  }
  return {{"team_id", u.team_id},
          {"team_name", u.team_name},
          {"month", u.month},
          {"closed", u.closed},
          {"as_of", core::FormatRfc3339(u.as_of)},
          {"people", std::move(people)},
          {"totals", std::move(totals)}};
}

}  // namespace

namespace handlers {

Answer GetTeam(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_ASSIGN_OR_RETURN(auto view, teams->Get(call.who));
  return Response::Json(200, TeamJson(view));
}

Answer GetTeamUsage(ApiContext& ctx, Call& call) {
  if (auto teams = Teams(ctx); !teams) return core::Fail(teams.error());
  if (ctx.invoices == nullptr) {
    return core::Fail(core::ErrorCode::kUnavailable, "unavailable",
                      "This server runs no invoices.");
  }
  auto it = call.req.query.find("month");
  const std::string month = it == call.req.query.end() ? "" : it->second;
  if (it != call.req.query.end() && month.empty()) {
    return core::InvalidArgument("invalid_month", "Say which month: ?month=YYYY-MM (UTC).");
  }
  GPUWERK_ASSIGN_OR_RETURN(auto usage,
                           teams::TeamUsageOf(ctx.db, ctx.clock, *ctx.invoices, call.who, month));
  return Response::Json(200, TeamUsageJson(usage));
}

Answer CreateTeam(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"name"}));
  // The bound is the body limit's: the service's own rule (1 to 64 characters) names the error.
  GPUWERK_ASSIGN_OR_RETURN(auto name, RequireString(body, "name", 1024, 0));
  GPUWERK_ASSIGN_OR_RETURN(auto view,
                           teams->Create(call.who, name, Authenticator::CallerOf(call.req)));
  return Response::Json(201, TeamJson(view));
}

Answer InviteToTeam(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"email"}));
  GPUWERK_ASSIGN_OR_RETURN(auto email, RequireString(body, "email", 320));
  GPUWERK_ASSIGN_OR_RETURN(
      auto sent, teams->InviteByEmail(call.who, email, Authenticator::CallerOf(call.req)));
  json j = InviteJson(sent.invite);
  j["resent"] = sent.resent;
  return Response::Json(sent.resent ? 200 : 201, j);
}

Answer RevokeTeamInvite(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  auto revoked =
      teams->RevokeInvite(call.who, call.req.PathParam("id"), Authenticator::CallerOf(call.req));
  if (!revoked) return GoneOr(std::move(revoked.error()));
  return Response::NoContent();
}

Answer AcceptTeamInvite(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"token"}));
  GPUWERK_ASSIGN_OR_RETURN(auto token, RequireString(body, "token", 256));
  auto view = teams->Accept(call.who, token, Authenticator::CallerOf(call.req));
  if (!view) return GoneOr(std::move(view.error()));
  return Response::Json(200, TeamJson(*view));
}

Answer RemoveTeamMember(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_TRY(
      teams->RemoveMember(call.who, call.req.PathParam("id"), Authenticator::CallerOf(call.req)));
  return Response::NoContent();
}

Answer LeaveTeam(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_TRY(teams->Leave(call.who, Authenticator::CallerOf(call.req)));
  return Response::NoContent();
}

Answer SetTeamRole(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"role"}));
  GPUWERK_ASSIGN_OR_RETURN(auto role, RequireString(body, "role", 16));
  GPUWERK_ASSIGN_OR_RETURN(auto member, teams->SetRole(call.who, call.req.PathParam("id"), role,
                                                       Authenticator::CallerOf(call.req)));
  return Response::Json(200, MemberJson(member));
}

// What an invitation link is for (docs/teams.md "Invitations"): the team's name and the invited
// address, for the dashboard's /team/accept page to show before its button accepts
// (POST /api/v1/team/invites/accept). Reading it uses nothing up, so a mail scanner that opens
// the link accepts nothing.
Answer PreviewTeamInvite(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto* teams, Teams(ctx));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"token"}));
  GPUWERK_ASSIGN_OR_RETURN(auto token, RequireString(body, "token", 256));
  auto landing = teams->LandingOf(token);
  if (!landing) return GoneOr(std::move(landing.error()));
  return Response::Json(200, {{"team_name", landing->team_name},
                              {"email", landing->email},
                              {"expires_at", core::FormatRfc3339(landing->expires_at)}});
}

}  // namespace handlers
}  // namespace gpuwerk::api
