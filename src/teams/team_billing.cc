#include "teams/team_billing.h"

#include <algorithm>
#include <cctype>

#include "audit/audit_log.h"
#include "billing/billing_account_id.h"
#include "billing/billing_session_table.h"
#include "teams/team_member_table.h"
#include "teams/team_table.h"

namespace gpuwerk::teams {

core::Result<billing::BillingAccount> TeamBillingAccountOf(store::Transaction& tx,
                                                           const std::string& person_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto membership, TeamMemberTable::ActiveOf(tx, person_id));
  if (!membership) return billing::SoloAccountOf(tx, person_id);
  GPUWERK_ASSIGN_OR_RETURN(auto team, TeamTable::Find(tx, membership->team_id));
  if (!team) return core::Internal("an active membership of a missing team");
  return billing::BillingAccount{.id = team->id,
                                 .kind = billing::AccountKind::kTeam,
                                 .name = team->name,
                                 .may_manage = membership->role == Role::kOwner};
}

core::Result<SoloTakeover> MoveSoloBillingToTeam(store::Transaction& tx, core::Clock& clock,
                                                 core::Rng& rng, const std::string& team_id,
                                                 const std::string& owner_id) {
  SoloTakeover out;
  const std::string solo = billing::SoloBillingAccountId(owner_id);
  GPUWERK_ASSIGN_OR_RETURN(out.sessions_moved,
                           billing::BillingSessionTable::MoveOpen(tx, owner_id, solo, team_id));
  if (out.sessions_moved > 0) {
    GPUWERK_TRY(
        audit::RecordAudit(tx, clock, rng,
                           {.actor_id = owner_id,
                            .action = "billing.move_to_team",
                            .target = team_id,
                            .source_address = "system",
                            .detail = {{"from", solo}, {"billing_sessions", out.sessions_moved}}}));
  }
  return out;
}

}  // namespace gpuwerk::teams

namespace gpuwerk::teams {

core::Result<billing::PaymentMethods::CardHolder> TeamCardHolder(store::Transaction& tx,
                                                                 std::string_view ref) {
  std::optional<TeamRow> team;
  std::string near;  // a team whose name differs from `ref` in case only
  if (ref.starts_with("team_")) {
    GPUWERK_ASSIGN_OR_RETURN(team, TeamTable::Find(tx, std::string(ref)));
  }
  if (!team && !ref.starts_with("team_")) {
    // Names are unique ignoring case; the operator must type the name exactly as it is.
    std::string norm(ref);
    std::transform(norm.begin(), norm.end(), norm.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    GPUWERK_ASSIGN_OR_RETURN(auto by_name, TeamTable::FindByName(tx, norm));
    if (by_name && by_name->name == ref)
      team = std::move(by_name);
    else if (by_name)
      near = by_name->name;
  }
  if (!team && !near.empty()) {
    // Say the exact name to type rather than only that this one is not it.
    return core::Fail(core::Error(core::ErrorCode::kNotFound, "team_not_found",
                                  "No team is named exactly that: the team's name is \"" + near +
                                      "\" (teams are named by their id, team_…, or their exact "
                                      "name, case included).")
                          .WithDetail("team", std::string(ref))
                          .WithDetail("did_you_mean", near));
  }
  if (!team) {
    return core::Fail(core::Error(core::ErrorCode::kNotFound, "team_not_found",
                                  "No team has that id or exact name; teams are named by their "
                                  "id (team_…) or their exact name.")
                          .WithDetail("team", std::string(ref)));
  }
  return billing::PaymentMethods::CardHolder{.person_id = "",
                                             .account = {.id = team->id,
                                                         .kind = billing::AccountKind::kTeam,
                                                         .name = team->name,
                                                         .may_manage = true}};
}

}  // namespace gpuwerk::teams
