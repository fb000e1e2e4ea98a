// team create|show|invite|revoke|remove|leave|role: the caller's team (R-15; docs/teams.md). The
// server decides every role rule; these verbs only name members and invitations by email.
#include <algorithm>
#include <cctype>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"
#include "core/strings.h"

namespace gpuwerk::cli::internal {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The options of the team verbs.
struct TeamOptions {
  std::string name;    ///< create: the team's name
  std::string email;   ///< invite: the address
  std::string invite;  ///< revoke: an invitation's id or address
  std::string member;  ///< remove, role: a member's email or person id
  std::string role;    ///< role: "owner" or "member"
  std::string month;   ///< usage: "YYYY-MM" (UTC); "" the current month
  bool yes = false;    ///< remove: confirmed beforehand (--yes), nothing asked
};

/// The member of `team` whose email (case-insensitively) or person id is `who`. Errors:
/// "not_found" saying where to look.
core::Result<json> FindMember(const json& team, const std::string& who) {
  const json& members = Field(team, "members");
  if (members.is_array()) {
    for (const auto& m : members) {
      if (Str(m, "person_id") == who) return m;
    }
    for (const auto& m : members) {
      const std::string email = Str(m, "email");
      if (email.size() == who.size() &&
          std::equal(email.begin(), email.end(), who.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          })) {
        return m;
      }
    }
  }
  return core::Fail(ErrorCode::kNotFound, "not_found",
                    "no member " + SafeText(who) + " in your team; see 'gpuwerk team show'");
}

void PrintTeam(VerbContext& ctx, const json& team) {
  if (PrintJsonIfAsked(ctx, team)) return;
  std::string out = "Team " + SafeText(Str(team, "name")) + " (" + SafeText(Str(team, "id")) +
                    "), you are " + SafeText(Str(team, "my_role")) + ".\n\n";
  Table members({"EMAIL", "ROLE", "JOINED", "ID"});
  for (const auto& m : Field(team, "members")) {
    members.AddRow({CellText(Field(m, "email")), CellText(Field(m, "role")),
                    CellText(Field(m, "joined_at")), CellText(Field(m, "person_id"))});
  }
  out += members.Render();
  const json& invites = Field(team, "invites");
  if (invites.is_array()) {
    if (invites.empty()) {
      out += "\nNo pending invitations.\n";
    } else {
      Table table({"INVITED", "BY", "SENT", "EXPIRES", "ID"});
      for (const auto& i : invites) {
        table.AddRow({CellText(Field(i, "email")), CellText(Field(i, "invited_by")),
                      CellText(Field(i, "sent_at")), CellText(Field(i, "expires_at")),
                      CellText(Field(i, "id"))});
      }
      out += "\nPending invitations:\n" + table.Render();
    }
  }
  Print(ctx, out);
}

core::Result<void> TeamCreateVerb(VerbContext& ctx, const TeamOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  json body = {{"name", opt.name}};
  GPUWERK_ASSIGN_OR_RETURN(json team, server.Ok("POST", "/api/v1/team", &body));
  if (PrintJsonIfAsked(ctx, team)) return {};
  Print(ctx, "Created team " + SafeText(Str(team, "name")) +
                 "; you are its owner. Invite people with 'gpuwerk team invite EMAIL'.\n");
  return {};
}

core::Result<void> TeamShowVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json team, server.Ok("GET", "/api/v1/team"));
  PrintTeam(ctx, team);
  return {};
}

core::Result<void> TeamInviteVerb(VerbContext& ctx, const TeamOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  json body = {{"email", opt.email}};
  GPUWERK_ASSIGN_OR_RETURN(json invite, server.Ok("POST", "/api/v1/team/invites", &body));
  if (PrintJsonIfAsked(ctx, invite)) return {};
  const bool resent = Field(invite, "resent").is_boolean() && invite["resent"].get<bool>();
  Print(ctx, std::string(resent ? "Sent a new invitation link to " : "Invited ") +
                 SafeText(Str(invite, "email")) +
                 (resent ? " (the older link no longer works)" : "") + "; it expires " +
                 SafeText(Str(invite, "expires_at")) + ".\n");
  return {};
}

core::Result<void> TeamRevokeVerb(VerbContext& ctx, const TeamOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  std::string id = opt.invite;
  std::string shown = opt.invite;
  if (opt.invite.find('@') != std::string::npos) {
    // An address: its pending invitation (owners see them in the team).
    GPUWERK_ASSIGN_OR_RETURN(json team, server.Ok("GET", "/api/v1/team"));
    const json* found = FindItem(Field(team, "invites"), opt.invite, "email");
    if (found == nullptr) {
      return core::Fail(
          ErrorCode::kNotFound, "not_found",
          "no pending invitation for " + SafeText(opt.invite) + "; see 'gpuwerk team show'");
    }
    id = Str(*found, "id");
  }
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/team/invites/" + PathEscape(id)));
  if (!PrintJsonIfAsked(ctx, json{{"id", id}, {"revoked", true}})) {
    Print(ctx, "Revoked the invitation " + SafeText(shown) + "; its link no longer works.\n");
  }
  return {};
}

/// Asks before `team remove` deletes a member's instances: (y/N) on a terminal; without one,
/// only --yes goes on. The API does not say how many instances a member has (an owner sees
/// members, not their instances), so the question says which ones, not how many.
core::Result<void> ConfirmRemoval(VerbContext& ctx, const TeamOptions& opt,
                                  const std::string& email, const std::string& team) {
  if (opt.yes) return {};
  if (!ctx.io.in_is_terminal) {
    return core::Fail(ErrorCode::kFailedPrecondition, "confirmation_required",
                      "removing " + email + " from " + team +
                          " deletes their instances billed to the team; not on a terminal, so "
                          "nothing was asked and nothing removed: pass --yes to confirm");
  }
  *ctx.io.err << "Remove " << email << " from " << team
              << "? Their instances billed to the team are deleted now. (y/N) ";
  ctx.io.err->flush();
  std::string answer;
  if (!std::getline(*ctx.io.in, answer)) answer.clear();
  answer = std::string(core::Trim(answer, core::kWhitespace));
  if (answer == "y" || answer == "Y" || answer == "yes" || answer == "YES" || answer == "Yes") {
    return {};
  }
  return core::Fail(ErrorCode::kFailedPrecondition, "cancelled",
                    "not removed: " + email + " stays in " + team);
}

core::Result<void> TeamRemoveVerb(VerbContext& ctx, const TeamOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json team, server.Ok("GET", "/api/v1/team"));
  GPUWERK_ASSIGN_OR_RETURN(json member, FindMember(team, opt.member));
  GPUWERK_TRY(
      ConfirmRemoval(ctx, opt, SafeText(Str(member, "email")), SafeText(Str(team, "name"))));
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/team/members/" + PathEscape(Str(member, "person_id"))));
  if (!PrintJsonIfAsked(ctx, member)) {
    Print(ctx, "Removed " + SafeText(Str(member, "email")) + " from " +
                   SafeText(Str(team, "name")) +
                   "; their instances billed to the team are being deleted.\n");
  }
  return {};
}

core::Result<void> TeamLeaveVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_TRY(server.Ok("POST", "/api/v1/team/leave"));
  if (!PrintJsonIfAsked(ctx, json{{"left", true}})) {
    Print(ctx,
          "You left your team; your instances billed to it are being deleted and new ones are "
          "billed to you.\n");
  }
  return {};
}

core::Result<void> TeamRoleVerb(VerbContext& ctx, const TeamOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json team, server.Ok("GET", "/api/v1/team"));
  GPUWERK_ASSIGN_OR_RETURN(json member, FindMember(team, opt.member));
  json body = {{"role", opt.role}};
  GPUWERK_ASSIGN_OR_RETURN(
      json changed,
      server.Ok("PUT", "/api/v1/team/members/" + PathEscape(Str(member, "person_id")) + "/role",
                &body));
  if (!PrintJsonIfAsked(ctx, changed)) {
    Print(ctx, SafeText(Str(changed, "email")) + " is now " + SafeText(Str(changed, "role")) +
                   " of " + SafeText(Str(team, "name")) + ".\n");
  }
  return {};
}

core::Result<void> TeamUsageVerb(VerbContext& ctx, const TeamOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  std::string path = "/api/v1/team/usage";
  if (!opt.month.empty()) path += "?month=" + PathEscape(opt.month);
  GPUWERK_ASSIGN_OR_RETURN(json usage, server.Ok("GET", path));
  if (PrintJsonIfAsked(ctx, usage)) return {};
  const bool closed = Field(usage, "closed") == true;
  std::string out =
      "Team " + SafeText(Str(usage, "team_name")) + ", " + SafeText(Str(usage, "month")) +
      (closed ? " (invoiced)" : " (running, as of " + SafeText(Str(usage, "as_of")) + ")") +
      ":\n\n";
  const json& people = Field(usage, "people");
  if (!people.is_array() || people.empty()) {
    out += "Nothing billed to the team this month.\n";
  } else {
    Table table({"WHO", "MEMBER", "MINUTES", "AMOUNT", "ID"});
    for (const auto& p : people) {
      table.AddRow({CellText(Field(p, "label")), Field(p, "member") == true ? "yes" : "no",
                    CellText(Field(p, "minutes")), CellText(Field(p, "amount")),
                    CellText(Field(p, "person_id"))});
    }
    out += table.Render();
    std::string totals;
    for (const auto& t : Field(usage, "totals")) {
      if (!totals.empty()) totals += ", ";
      totals += SafeText(Str(t, "amount"));
    }
    out += "\nTeam total: " + totals + "\n";
  }
  Print(ctx, out);
  return {};
}

}  // namespace

void AddTeamVerbs(CLI::App& app, const VerbRegistry& verbs) {
  auto opt = std::make_shared<TeamOptions>();
  CLI::App* team = VerbRegistry::AddGroup(app, "team", "Your team: members, invitations, roles");
  verbs.AddVerb(*team, "create", "Create a team and become its owner", opt, &TeamCreateVerb)
      ->add_option("NAME", opt->name, "the team's name (letters, digits, spaces, . - _)")
      ->required()
      ->check(NamedArgument());
  verbs.AddVerb(*team, "show", "Show your team, its members and (owners) invitations",
                &TeamShowVerb);
  verbs
      .AddVerb(*team, "invite", "Invite an email address to your team (owners)", opt,
               &TeamInviteVerb)
      ->add_option("EMAIL", opt->email, "the address to invite")
      ->required()
      ->check(NamedArgument());
  verbs.AddVerb(*team, "revoke", "Revoke a pending invitation (owners)", opt, &TeamRevokeVerb)
      ->add_option("INVITE", opt->invite, "the invitation's id or address (see 'team show')")
      ->required()
      ->check(NamedArgument());
  CLI::App* remove = verbs.AddVerb(
      *team, "remove",
      "Remove a member from your team, deleting their instances billed to it (owners; asks first)",
      opt, &TeamRemoveVerb);
  remove->add_option("MEMBER", opt->member, "the member's email or person id")
      ->required()
      ->check(NamedArgument());
  remove->add_flag("-y,--yes", opt->yes,
                   "do not ask (needed when standard input is not a terminal)");
  verbs.AddVerb(*team, "leave", "Leave your team", &TeamLeaveVerb);
  verbs
      .AddVerb(*team, "usage",
               "Your team's usage by person for a month: what its invoice (or running total) "
               "adds up (owners)",
               opt, &TeamUsageVerb)
      ->add_option("--month", opt->month, "a UTC month as YYYY-MM (default: the current one)");
  CLI::App* role = verbs.AddVerb(*team, "role", "Make a member an owner or a member (owners)", opt,
                                 &TeamRoleVerb);
  role->add_option("MEMBER", opt->member, "the member's email or person id")
      ->required()
      ->check(NamedArgument());
  role->add_option("ROLE", opt->role, "owner or member")
      ->required()
      ->check(CLI::IsMember({"owner", "member"}));
}

}  // namespace gpuwerk::cli::internal
