#include "teams/team_service.h"

#include <cctype>
#include <utility>

#include "audit/audit_log.h"
#include "auth/email_address.h"
#include "auth/person_table.h"
#include "core/strings.h"
#include "teams/team_mails.h"

namespace gpuwerk::teams {
namespace {

using core::ErrorCode;
using store::Transaction;

core::Error NoTeam() {
  return core::Error(ErrorCode::kNotFound, "no_team",
                     "You are in no team. Create one with 'gpuwerk team create NAME' (POST "
                     "/api/v1/team), or accept an invitation mailed to you.");
}

core::Error InviteGone() {
  return core::Error(ErrorCode::kFailedPrecondition, "invite_gone",
                     "This invitation is no longer valid: it was used, revoked, replaced by a "
                     "newer one, or it expired. Ask the team's owner to invite you again.");
}

core::Error LastOwner(std::string_view what) {
  return core::Error(ErrorCode::kFailedPrecondition, "last_owner",
                     std::string("A team always has an owner, so the last owner cannot ") +
                         std::string(what) +
                         ". Make another member an owner first ('gpuwerk team role EMAIL "
                         "owner').");
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// The email of `person_id`, "" when the account is gone.
core::Result<std::string> EmailOf(Transaction& tx, const std::string& person_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, person_id));
  return email.value_or("");
}

}  // namespace

core::Result<std::string> ValidateTeamName(std::string_view name) {
  name = core::Trim(name, " ");
  if (name.empty() || name.size() > 64) {
    return core::InvalidArgument("invalid_name", "A team name must be 1 to 64 characters.");
  }
  for (unsigned char c : name) {
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == ' ')) {
      return core::InvalidArgument(
          "invalid_name", "A team name may hold letters, digits, spaces, '.', '-' and '_'.");
    }
  }
  auto lower = [](unsigned char c) { return static_cast<char>(std::tolower(c)); };
  if (name.size() >= 5 && lower(name[0]) == 't' && lower(name[1]) == 'e' && lower(name[2]) == 'a' &&
      lower(name[3]) == 'm' && name[4] == '_') {
    // Team ids are "team_…": a name never looks like one, so an operator's command naming a team
    // by id or name (TeamCardHolder) means one team only.
    return core::InvalidArgument("invalid_name",
                                 "A team name may not begin with 'team_': that is how team ids "
                                 "begin.");
  }
  return std::string(name);
}

TeamService::TeamService(store::Database& db, core::Clock& clock, core::Rng& rng,
                         mail::Outbox& outbox, TeamOptions options,
                         std::function<void()> mail_enqueued)
    : db_(db),
      clock_(clock),
      rng_(rng),
      outbox_(outbox),
      options_(std::move(options)),
      limiter_(clock),
      mail_enqueued_(std::move(mail_enqueued)) {}

core::Result<std::optional<MembershipRow>> TeamService::ActiveMembership(
    Transaction& tx, const std::string& person_id) {
  return TeamMemberTable::ActiveOf(tx, person_id);
}

core::Result<MembershipRow> TeamService::MembershipOf(Transaction& tx, const auth::Principal& who) {
  GPUWERK_ASSIGN_OR_RETURN(auto m, TeamMemberTable::ActiveOf(tx, who.person_id));
  if (!m) return core::Fail(NoTeam());
  return *m;
}

core::Result<MembershipRow> TeamService::OwnerMembership(Transaction& tx,
                                                         const auth::Principal& who,
                                                         std::string_view what) {
  GPUWERK_ASSIGN_OR_RETURN(auto m, MembershipOf(tx, who));
  if (m.role != Role::kOwner) {
    return core::Fail(ErrorCode::kPermissionDenied, "owner_only",
                      std::string("Only the team's owners may ") + std::string(what) +
                          "; ask an owner (see 'gpuwerk team show').");
  }
  return m;
}

core::Result<MembershipRow> TeamService::MemberIn(Transaction& tx, const std::string& team_id,
                                                  std::string_view person_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto m, TeamMemberTable::ActiveOf(tx, std::string(person_id)));
  if (!m || m->team_id != team_id) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "No member with that id in your team; see 'gpuwerk team show'.");
  }
  return *m;
}

core::Result<TeamView> TeamService::ViewOf(Transaction& tx, const MembershipRow& me) {
  GPUWERK_ASSIGN_OR_RETURN(auto team, TeamTable::Find(tx, me.team_id));
  if (!team) return core::Internal("membership of a missing team");
  TeamView view{.team = *team, .my_role = me.role, .members = {}, .invites = {}};
  GPUWERK_ASSIGN_OR_RETURN(auto members, TeamMemberTable::ListActive(tx, me.team_id));
  for (const auto& m : members) {
    GPUWERK_ASSIGN_OR_RETURN(auto email, EmailOf(tx, m.person_id));
    view.members.push_back(
        {.person_id = m.person_id, .email = email, .role = m.role, .joined_at = m.joined_at});
  }
  if (me.role == Role::kOwner) {
    GPUWERK_ASSIGN_OR_RETURN(auto invites,
                             TeamInviteTable::ListPending(tx, me.team_id, clock_.NowUnix()));
    for (const auto& i : invites) {
      GPUWERK_ASSIGN_OR_RETURN(auto by, EmailOf(tx, i.invited_by));
      view.invites.push_back({.id = i.id,
                              .email = i.email,
                              .invited_by_email = by,
                              .created_at = i.created_at,
                              .sent_at = i.sent_at,
                              .expires_at = i.expires_at});
    }
  }
  return view;
}

core::Result<void> TeamService::Audit(Transaction& tx, const auth::Principal& who,
                                      const auth::Caller& caller, std::string_view action,
                                      const std::string& target, nlohmann::json detail) {
  return audit::RecordAudit(tx, clock_, rng_,
                            {.actor_id = who.person_id,
                             .action = std::string(action),
                             .target = target,
                             .source_address = caller.address,
                             .detail = std::move(detail)});
}

core::Result<TeamView> TeamService::Get(const auth::Principal& who) {
  return db_.Read([&](Transaction& tx) -> core::Result<TeamView> {
    GPUWERK_ASSIGN_OR_RETURN(auto me, MembershipOf(tx, who));
    return ViewOf(tx, me);
  });
}

core::Result<TeamView> TeamService::Create(const auth::Principal& who, std::string_view name,
                                           const auth::Caller& caller) {
  GPUWERK_ASSIGN_OR_RETURN(std::string valid, ValidateTeamName(name));
  return db_.Write([&](Transaction& tx) -> core::Result<TeamView> {
    GPUWERK_ASSIGN_OR_RETURN(auto current, TeamMemberTable::ActiveOf(tx, who.person_id));
    if (current) {
      return core::Fail(ErrorCode::kFailedPrecondition, "already_in_team",
                        "You are in a team already (one team per person). Leave it first "
                        "('gpuwerk team leave').");
    }
    const std::string name_norm = Lower(valid);
    GPUWERK_ASSIGN_OR_RETURN(auto taken, TeamTable::FindByName(tx, name_norm));
    if (taken) {
      return core::Fail(ErrorCode::kAlreadyExists, "team_name_taken",
                        "A team with that name exists already; choose another name.");
    }
    const int64_t now = clock_.NowUnix();
    TeamRow team{.id = core::NewId(rng_, "team"),
                 .name = valid,
                 .created_by = who.person_id,
                 .created_at = now};
    GPUWERK_TRY(TeamTable::Insert(tx, team, name_norm));
    MembershipRow owner{.id = core::NewId(rng_, "tmm"),
                        .team_id = team.id,
                        .person_id = who.person_id,
                        .role = Role::kOwner,
                        .joined_at = now};
    GPUWERK_TRY(TeamMemberTable::Insert(tx, owner));
    if (options_.hooks.team_created) {
      GPUWERK_TRY(options_.hooks.team_created(tx, team.id, who.person_id));
    }
    GPUWERK_TRY(Audit(tx, who, caller, "team.create", team.id, {{"name", team.name}}));
    return ViewOf(tx, owner);
  });
}

core::Result<SentInvite> TeamService::InviteByEmail(const auth::Principal& who,
                                                    std::string_view email,
                                                    const auth::Caller& caller) {
  GPUWERK_ASSIGN_OR_RETURN(auto address, auth::ParseEmailAddress(email));
  auto sent = db_.Write([&](Transaction& tx) -> core::Result<SentInvite> {
    GPUWERK_ASSIGN_OR_RETURN(auto me, OwnerMembership(tx, who, "invite"));
    GPUWERK_ASSIGN_OR_RETURN(auto person, auth::PersonTable::FindByEmail(tx, address.normalised));
    if (person) {
      GPUWERK_ASSIGN_OR_RETURN(auto theirs, TeamMemberTable::ActiveOf(tx, person->person.id));
      if (theirs && theirs->team_id == me.team_id) {
        return core::Fail(core::Error(ErrorCode::kFailedPrecondition, "already_member",
                                      "That address is a member of your team already; nothing "
                                      "was sent.")
                              .WithDetail("field", "email"));
      }
    }
    GPUWERK_ASSIGN_OR_RETURN(auto team, TeamTable::Find(tx, me.team_id));
    if (!team) return core::Internal("membership of a missing team");
    GPUWERK_ASSIGN_OR_RETURN(auto retry,
                             limiter_.RetryAfter(tx, options_.invite_mails_per_team, team->id));
    if (retry) {
      return core::Fail(auth::RateLimiter::Limited(
          "Your team sent many invitations in the last hour; try again later.", *retry));
    }
    const int64_t now = clock_.NowUnix();
    const int64_t expires_at = now + options_.invite_lifetime.count();
    const std::string token = core::RandomToken(rng_);
    GPUWERK_ASSIGN_OR_RETURN(auto pending,
                             TeamInviteTable::FindPending(tx, team->id, address.normalised));
    SentInvite out;
    if (pending) {
      GPUWERK_ASSIGN_OR_RETURN(
          bool resent,
          TeamInviteTable::Resend(tx, pending->id, auth::TokenHash(token), now, expires_at));
      if (!resent) return core::Internal("pending invitation vanished inside its transaction");
      out.resent = true;
      // The mail goes to the address as first typed (the row's), like the first mail.
      out.invite = {.id = pending->id,
                    .email = pending->email,
                    .invited_by_email = who.email,
                    .created_at = pending->created_at,
                    .sent_at = now,
                    .expires_at = expires_at};
    } else {
      GPUWERK_ASSIGN_OR_RETURN(auto open, TeamInviteTable::ListPending(tx, team->id, now));
      if (static_cast<int64_t>(open.size()) >= options_.max_pending_invites) {
        return core::Fail(ErrorCode::kFailedPrecondition, "too_many_invites",
                          "Your team has too many pending invitations; revoke some first "
                          "('gpuwerk team revoke ID').");
      }
      InviteRow row{.id = core::NewId(rng_, "tinv"),
                    .team_id = team->id,
                    .email = address.display,
                    .email_norm = address.normalised,
                    .token_hash = auth::TokenHash(token),
                    .invited_by = who.person_id,
                    .created_at = now,
                    .sent_at = now,
                    .expires_at = expires_at};
      GPUWERK_TRY(TeamInviteTable::Insert(tx, row));
      out.invite = {.id = row.id,
                    .email = row.email,
                    .invited_by_email = who.email,
                    .created_at = now,
                    .sent_at = now,
                    .expires_at = expires_at};
    }
    GPUWERK_TRY(limiter_.Record(tx, options_.invite_mails_per_team, team->id));
    const std::string link = options_.public_url + "/team/accept?token=" + token;
    GPUWERK_TRY(outbox_.Enqueue(
        tx, TeamInviteMail(out.invite.email, team->name, who.email, link, options_.public_url + "/",
                           static_cast<int>(options_.invite_lifetime.count() / 86400))));
    GPUWERK_TRY(Audit(tx, who, caller, out.resent ? "team.invite_resend" : "team.invite", team->id,
                      {{"invite_id", out.invite.id}, {"email", out.invite.email}}));
    return out;
  });
  if (sent && mail_enqueued_) mail_enqueued_();
  return sent;
}

core::Result<void> TeamService::RevokeInvite(const auth::Principal& who, std::string_view invite_id,
                                             const auth::Caller& caller) {
  return db_.Write([&](Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto me, OwnerMembership(tx, who, "revoke invitations"));
    GPUWERK_ASSIGN_OR_RETURN(auto invite, TeamInviteTable::Find(tx, std::string(invite_id)));
    if (!invite || invite->team_id != me.team_id) {
      return core::Fail(ErrorCode::kNotFound, "not_found",
                        "No invitation with that id in your team; see 'gpuwerk team show'.");
    }
    const int64_t now = clock_.NowUnix();
    if (invite->state != "pending" || invite->expires_at <= now) return core::Fail(InviteGone());
    GPUWERK_ASSIGN_OR_RETURN(bool ended, TeamInviteTable::End(tx, invite->id, "revoked", now, ""));
    if (!ended) return core::Fail(InviteGone());
    return Audit(tx, who, caller, "team.invite_revoke", me.team_id,
                 {{"invite_id", invite->id}, {"email", invite->email}});
  });
}

core::Result<InviteLanding> TeamService::LandingOf(std::string_view token) {
  return db_.Read([&](Transaction& tx) -> core::Result<InviteLanding> {
    GPUWERK_ASSIGN_OR_RETURN(auto invite,
                             TeamInviteTable::FindByTokenHash(tx, auth::TokenHash(token)));
    if (!invite || invite->state != "pending" || invite->expires_at <= clock_.NowUnix()) {
      return core::Fail(InviteGone());
    }
    GPUWERK_ASSIGN_OR_RETURN(auto team, TeamTable::Find(tx, invite->team_id));
    if (!team) return core::Fail(InviteGone());
    return InviteLanding{
        .team_name = team->name, .email = invite->email, .expires_at = invite->expires_at};
  });
}

core::Result<TeamView> TeamService::Accept(const auth::Principal& who, std::string_view token,
                                           const auth::Caller& caller) {
  return db_.Write([&](Transaction& tx) -> core::Result<TeamView> {
    const int64_t now = clock_.NowUnix();
    GPUWERK_ASSIGN_OR_RETURN(auto invite,
                             TeamInviteTable::FindByTokenHash(tx, auth::TokenHash(token)));
    if (!invite || invite->state != "pending" || invite->expires_at <= now) {
      return core::Fail(InviteGone());
    }
    GPUWERK_ASSIGN_OR_RETURN(auto person, auth::PersonTable::Find(tx, who.person_id));
    if (!person || person->email_norm != invite->email_norm) {
      return core::Fail(ErrorCode::kPermissionDenied, "invite_for_another_address",
                        "This invitation is for another address. Sign in with the address it "
                        "was mailed to (sign up with it first if it has no account), then open "
                        "the link again.");
    }
    GPUWERK_ASSIGN_OR_RETURN(auto current, TeamMemberTable::ActiveOf(tx, who.person_id));
    if (current && current->team_id == invite->team_id) {
      return core::Fail(ErrorCode::kFailedPrecondition, "already_member",
                        "You are a member of this team already.");
    }
    if (current) {
      return core::Fail(ErrorCode::kFailedPrecondition, "already_in_team",
                        "You are in another team (one team per person). Leave it first "
                        "('gpuwerk team leave'), then open the link again.");
    }
    GPUWERK_ASSIGN_OR_RETURN(bool won,
                             TeamInviteTable::End(tx, invite->id, "accepted", now, who.person_id));
    if (!won) return core::Fail(InviteGone());
    MembershipRow row{.id = core::NewId(rng_, "tmm"),
                      .team_id = invite->team_id,
                      .person_id = who.person_id,
                      .role = Role::kMember,
                      .joined_at = now};
    GPUWERK_TRY(TeamMemberTable::Insert(tx, row));
    GPUWERK_TRY(
        Audit(tx, who, caller, "team.invite_accept", invite->team_id, {{"invite_id", invite->id}}));
    return ViewOf(tx, row);
  });
}

core::Result<void> TeamService::RemoveMember(const auth::Principal& who, std::string_view person_id,
                                             const auth::Caller& caller) {
  std::function<void()> after_commit;
  auto removed = db_.Write([&](Transaction& tx) -> core::Result<void> {
    after_commit = nullptr;  // a retried transaction starts over
    GPUWERK_ASSIGN_OR_RETURN(auto me, OwnerMembership(tx, who, "remove members"));
    GPUWERK_ASSIGN_OR_RETURN(auto target, MemberIn(tx, me.team_id, person_id));
    if (target.role == Role::kOwner) {
      GPUWERK_ASSIGN_OR_RETURN(int64_t owners, TeamMemberTable::CountOwners(tx, me.team_id));
      if (owners <= 1) return core::Fail(LastOwner("be removed"));
    }
    const int64_t now = clock_.NowUnix();
    GPUWERK_ASSIGN_OR_RETURN(bool ended,
                             TeamMemberTable::End(tx, target.id, now, "removed", who.person_id));
    if (!ended) return core::Internal("membership ended inside its transaction");
    if (options_.hooks.member_left) {
      GPUWERK_ASSIGN_OR_RETURN(after_commit,
                               options_.hooks.member_left(tx, me.team_id, target.person_id, now));
    }
    GPUWERK_ASSIGN_OR_RETURN(auto team, TeamTable::Find(tx, me.team_id));
    GPUWERK_ASSIGN_OR_RETURN(auto email, EmailOf(tx, target.person_id));
    if (team && !email.empty() && target.person_id != who.person_id) {
      GPUWERK_TRY(outbox_.Enqueue(
          tx, RemovedFromTeamMail(email, team->name, who.email, options_.public_url + "/")));
    }
    return Audit(tx, who, caller, "team.member_remove", me.team_id,
                 {{"person_id", target.person_id}, {"role", RoleName(target.role)}});
  });
  if (removed && after_commit) after_commit();
  if (removed && mail_enqueued_) mail_enqueued_();
  return removed;
}

core::Result<void> TeamService::Leave(const auth::Principal& who, const auth::Caller& caller) {
  std::function<void()> after_commit;
  auto left = db_.Write([&](Transaction& tx) -> core::Result<void> {
    after_commit = nullptr;  // a retried transaction starts over
    GPUWERK_ASSIGN_OR_RETURN(auto me, MembershipOf(tx, who));
    // The last owner may leave only as the team's last member: the team is then closed (no
    // members; its pending invitations revoked, so nobody joins a team without an owner).
    bool closes = false;
    if (me.role == Role::kOwner) {
      GPUWERK_ASSIGN_OR_RETURN(int64_t owners, TeamMemberTable::CountOwners(tx, me.team_id));
      if (owners <= 1) {
        GPUWERK_ASSIGN_OR_RETURN(auto active, TeamMemberTable::ListActive(tx, me.team_id));
        if (active.size() > 1) {
          return core::Fail(core::Error(
              ErrorCode::kFailedPrecondition, "last_owner",
              "A team always has an owner, so its last owner cannot leave while others are "
              "members. Make another member an owner first ('gpuwerk team role EMAIL owner'), or "
              "remove the others: the team's last member may leave, which closes the team."));
        }
        closes = true;
      }
    }
    const int64_t now = clock_.NowUnix();
    GPUWERK_ASSIGN_OR_RETURN(bool ended, TeamMemberTable::End(tx, me.id, now, "left", ""));
    if (!ended) return core::Internal("membership ended inside its transaction");
    if (closes) {
      GPUWERK_ASSIGN_OR_RETURN(auto pending, TeamInviteTable::ListPending(tx, me.team_id, now));
      for (const auto& invite : pending) {
        GPUWERK_ASSIGN_OR_RETURN(bool revoked,
                                 TeamInviteTable::End(tx, invite.id, "revoked", now, ""));
        (void)revoked;  // false: another transaction ended it first (checked just below)
      }
      // An invitation accepted while this ran (its acceptor won the row) made a member: then
      // the team still has someone, and its last owner stays.
      GPUWERK_ASSIGN_OR_RETURN(auto joined, TeamMemberTable::ListActive(tx, me.team_id));
      if (!joined.empty()) return core::Fail(LastOwner("leave while others are members"));
    }
    if (options_.hooks.member_left) {
      GPUWERK_ASSIGN_OR_RETURN(after_commit,
                               options_.hooks.member_left(tx, me.team_id, who.person_id, now));
    }
    nlohmann::json detail = {{"role", RoleName(me.role)}};
    if (closes) detail["closed"] = true;
    return Audit(tx, who, caller, "team.leave", me.team_id, detail);
  });
  if (left && after_commit) after_commit();
  return left;
}

core::Result<Member> TeamService::SetRole(const auth::Principal& who, std::string_view person_id,
                                          std::string_view role, const auth::Caller& caller) {
  auto wanted = ParseRole(role);
  if (!wanted) {
    return core::Fail(core::Error(ErrorCode::kInvalidArgument, "invalid_role",
                                  "role must be \"owner\" or \"member\".")
                          .WithDetail("field", "role"));
  }
  return db_.Write([&](Transaction& tx) -> core::Result<Member> {
    GPUWERK_ASSIGN_OR_RETURN(auto me, OwnerMembership(tx, who, "change roles"));
    GPUWERK_ASSIGN_OR_RETURN(auto target, MemberIn(tx, me.team_id, person_id));
    if (target.role == Role::kOwner && *wanted == Role::kMember) {
      GPUWERK_ASSIGN_OR_RETURN(int64_t owners, TeamMemberTable::CountOwners(tx, me.team_id));
      if (owners <= 1) return core::Fail(LastOwner("be demoted"));
    }
    if (target.role != *wanted) {
      GPUWERK_ASSIGN_OR_RETURN(bool set, TeamMemberTable::SetRole(tx, target.id, *wanted));
      if (!set) return core::Internal("membership ended inside its transaction");
      GPUWERK_TRY(Audit(tx, who, caller, "team.role_change", me.team_id,
                        {{"person_id", target.person_id},
                         {"from", RoleName(target.role)},
                         {"to", RoleName(*wanted)}}));
    }
    GPUWERK_ASSIGN_OR_RETURN(auto email, EmailOf(tx, target.person_id));
    return Member{.person_id = target.person_id,
                  .email = email,
                  .role = *wanted,
                  .joined_at = target.joined_at};
  });
}

}  // namespace gpuwerk::teams
