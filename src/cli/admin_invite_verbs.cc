// admin invite: an operator invites someone by email (docs/accounts.md "Invitations"), the only
// way in when sign-up is by invitation.
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of `admin invite`.
struct AdminInviteOptions {
  std::string email;
};

core::Result<void> AdminInviteVerb(VerbContext& ctx, const AdminInviteOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  const json body = {{"email", opt.email}};
  GPUWERK_ASSIGN_OR_RETURN(json invite, server.Ok("POST", "/api/v1/admin/invites", &body));
  if (PrintJsonIfAsked(ctx, invite)) return {};
  Print(ctx, "Invited " + SafeText(Str(invite, "email")) +
                 ": the mailed link sets a password and signs in until " +
                 SafeText(Str(invite, "expires_at")) + ".\n");
  return {};
}

}  // namespace

void AddAdminInviteVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminInviteOptions>();
  CLI::App* cmd =
      verbs.AddVerb(admin, "invite",
                    "Invite someone by email: the mailed link (valid 7 days) makes their account",
                    opt, &AdminInviteVerb);
  cmd->footer(
      "The server mails the address a link, valid 7 days, that sets their password and makes "
      "their account. Inviting an address again mails a new link and voids the older one; an "
      "address whose account is confirmed is refused (account_exists).");
  cmd->add_option("EMAIL", opt->email, "the address to invite")->required()->check(NamedArgument());
}

}  // namespace gpuwerk::cli::internal
