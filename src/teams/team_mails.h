#pragma once

#include <string_view>

#include "mail/mail.h"

namespace gpuwerk::teams {

/// The invitation to join team `team_name` (docs/teams.md "Invitations"), sent by `inviter` (an
/// email). `link` opens a page whose button joins; it works once, only for an account with this
/// address, and expires in `days_valid` days. Outside text (the team's name, the inviter's
/// address) is escaped in the HTML part.
mail::Mail TeamInviteMail(std::string_view to, std::string_view team_name, std::string_view inviter,
                          std::string_view link, std::string_view signup_url, int days_valid);
/// The notice that an owner (`by`, an email) removed the person from team `team_name`: their
/// team-billed instances ended and they are billed on their own from now on.
mail::Mail RemovedFromTeamMail(std::string_view to, std::string_view team_name, std::string_view by,
                               std::string_view account_url);

}  // namespace gpuwerk::teams
