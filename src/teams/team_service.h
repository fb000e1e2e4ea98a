#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/account_service.h"
#include "auth/principal.h"
#include "auth/rate_limiter.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "store/database.h"
#include "teams/team_invite_table.h"
#include "teams/team_member_table.h"
#include "teams/team_table.h"

namespace gpuwerk::teams {

/// What other modules do when a team's membership changes, inside the same transaction (so the
/// change and its consequences commit together). Injected by app: teams does not depend on
/// billing or sched. Each may be empty.
struct TeamHooks {
  /// A team was created by `owner_id` (its billing account takes over the owner's solo payment
  /// method and open billing: docs/teams.md "Billing").
  std::function<core::Result<void>(store::Transaction&, const std::string& team_id,
                                   const std::string& owner_id)>
      team_created;
  /// `person_id` stopped being a member of `team_id` at `at` (Unix seconds), by leaving or being
  /// removed: their team-billed instances end at that minute and they fall back to solo billing.
  /// Returns what to do once the transaction has committed (empty: nothing), called exactly once
  /// then and never when it rolls back: telling relays and hosts about deleted instances must not
  /// run before the deletion is visible to them.
  std::function<core::Result<std::function<void()>>(store::Transaction&, const std::string& team_id,
                                                    const std::string& person_id, int64_t at)>
      member_left;
};

/// Settings of TeamService.
struct TeamOptions {
  std::string public_url = "http://127.0.0.1:8080";  ///< base of links in mails, no trailing /
  std::chrono::seconds invite_lifetime{7 * 86400};   ///< an invitation link lives 7 days
  /// Invitation mails per team (new and resent together): past it, 429 rate_limited.
  auth::RateRule invite_mails_per_team{"team_invite_team", 30, std::chrono::hours(1)};
  /// Pending invitations a team may have at once: past it, 409 too_many_invites.
  int64_t max_pending_invites = 100;
  TeamHooks hooks;
};

/// A member as the team shows it.
struct Member {
  std::string person_id;
  std::string email;  ///< "" when the account is gone
  Role role = Role::kMember;
  int64_t joined_at = 0;  ///< Unix seconds
};

/// A pending invitation as its team's owners see it.
struct Invite {
  std::string id;
  std::string email;
  std::string invited_by_email;  ///< "" when that account is gone
  int64_t created_at = 0;        ///< Unix seconds
  int64_t sent_at = 0;           ///< the latest mail
  int64_t expires_at = 0;
};

/// The caller's team as they may see it (docs/teams.md "Who sees what").
struct TeamView {
  TeamRow team;
  Role my_role = Role::kMember;
  std::vector<Member> members;
  /// Pending, unexpired invitations: filled for owners only (members see none).
  std::vector<Invite> invites;
};

/// An invitation just sent.
struct SentInvite {
  Invite invite;
  bool resent = false;  ///< the address had a pending invitation: it got a new link
};

/// A team's invitation as its link's landing page shows it, before anyone accepts.
struct InviteLanding {
  std::string team_name;
  std::string email;       ///< the invited address
  int64_t expires_at = 0;  ///< when the link stops working (Unix seconds)
};

/// The team name rule: trimmed, 1 to 64 characters, ASCII letters, digits, spaces, '.', '-' and
/// '_' (as API token names). Returns the trimmed name. Errors: kInvalidArgument "invalid_name".
core::Result<std::string> ValidateTeamName(std::string_view name);

/// Teams, their members and email invitations (R-15; docs/teams.md). Every change is one store
/// transaction that also writes its audit event (actor, action, target, source address; R-17),
/// its mail's outbox row, and what the hooks do. Roles are decided here, for every path (API,
/// CLI, tokens alike): only an active owner invites, revokes, removes and changes roles; a team
/// always keeps an owner. Thread-safe.
class TeamService {
 public:
  /// The references must outlive the service. `mail_enqueued` wakes the outbox worker after a
  /// transaction with a mail commits.
  TeamService(store::Database& db, core::Clock& clock, core::Rng& rng, mail::Outbox& outbox,
              TeamOptions options, std::function<void()> mail_enqueued = {});

  /// The caller's team. Errors: kNotFound "no_team" when they are in none.
  core::Result<TeamView> Get(const auth::Principal& who);
  /// Creates team `name` with the caller as its owner. Audited `team.create`. Errors:
  /// invalid_name; kFailedPrecondition "already_in_team" (one active team per person);
  /// kAlreadyExists "team_name_taken" (names are unique, case-insensitively).
  core::Result<TeamView> Create(const auth::Principal& who, std::string_view name,
                                const auth::Caller& caller);
  /// Invites `email` to the caller's team and mails the link. An address with a pending
  /// invitation gets a new link (the old one stops working) and one more mail, still one
  /// pending invitation. Audited `team.invite` / `team.invite_resend`. Errors: no_team;
  /// kPermissionDenied "owner_only"; invalid_email; kFailedPrecondition "already_member"
  /// (nothing sent); too_many_invites; rate_limited.
  core::Result<SentInvite> InviteByEmail(const auth::Principal& who, std::string_view email,
                                         const auth::Caller& caller);
  /// Revokes the caller's team's invitation `invite_id` at once: its link answers invite_gone.
  /// Audited `team.invite_revoke`. Errors: no_team; owner_only; kNotFound "not_found" (no such
  /// invitation of this team); kFailedPrecondition "invite_gone" (already accepted, revoked or
  /// expired: the API answers 410).
  core::Result<void> RevokeInvite(const auth::Principal& who, std::string_view invite_id,
                                  const auth::Caller& caller);
  /// Accepts the invitation whose link secret is `token`, for the caller: their account's
  /// address must be the invited one (compared lowercased). Single use. Audited
  /// `team.invite_accept`. Errors: kFailedPrecondition "invite_gone" (unknown, used, revoked,
  /// replaced or expired: one answer, 410 at the API); kPermissionDenied
  /// "invite_for_another_address" (the invitation stays usable); kFailedPrecondition
  /// "already_in_team" / "already_member" (it stays usable).
  core::Result<TeamView> Accept(const auth::Principal& who, std::string_view token,
                                const auth::Caller& caller);
  /// What an invitation link's landing page shows (a read: it uses nothing up). Errors:
  /// invite_gone.
  core::Result<InviteLanding> LandingOf(std::string_view token);
  /// Removes member `person_id` from the caller's team and mails them; the member_left hook runs.
  /// Audited `team.member_remove`. Errors: no_team; owner_only; kNotFound "not_found" (not an
  /// active member of this team); kFailedPrecondition "last_owner".
  core::Result<void> RemoveMember(const auth::Principal& who, std::string_view person_id,
                                  const auth::Caller& caller);
  /// The caller leaves their team; the member_left hook runs. Audited `team.leave`. Errors:
  /// no_team; kFailedPrecondition "last_owner" (make another member an owner first).
  core::Result<void> Leave(const auth::Principal& who, const auth::Caller& caller);
  /// Sets member `person_id`'s role. Audited `team.role_change` with the roles before and after.
  /// Errors: no_team; owner_only; not_found; kInvalidArgument "invalid_role"; last_owner (the
  /// last owner cannot be demoted).
  core::Result<Member> SetRole(const auth::Principal& who, std::string_view person_id,
                               std::string_view role, const auth::Caller& caller);

  /// The person's active membership, inside the caller's transaction (for billing: which
  /// account pays). nullopt when they are in no team.
  static core::Result<std::optional<MembershipRow>> ActiveMembership(store::Transaction& tx,
                                                                     const std::string& person_id);

 private:
  /// The caller's active membership. Errors: no_team.
  core::Result<MembershipRow> MembershipOf(store::Transaction& tx, const auth::Principal& who);
  /// As MembershipOf, and the caller must be an owner. Errors: no_team, owner_only.
  core::Result<MembershipRow> OwnerMembership(store::Transaction& tx, const auth::Principal& who,
                                              std::string_view what);
  /// The active membership of `person_id` in `team_id`. Errors: not_found.
  core::Result<MembershipRow> MemberIn(store::Transaction& tx, const std::string& team_id,
                                       std::string_view person_id);
  core::Result<TeamView> ViewOf(store::Transaction& tx, const MembershipRow& me);
  core::Result<void> Audit(store::Transaction& tx, const auth::Principal& who,
                           const auth::Caller& caller, std::string_view action,
                           const std::string& target, nlohmann::json detail);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  mail::Outbox& outbox_;
  TeamOptions options_;
  auth::RateLimiter limiter_;
  std::function<void()> mail_enqueued_;
};

}  // namespace gpuwerk::teams
