#include "teams/team_mails.h"

#include <fmt/format.h>

#include <string>

#include "core/encoding.h"

namespace gpuwerk::teams {

mail::Mail TeamInviteMail(std::string_view to, std::string_view team_name, std::string_view inviter,
                          std::string_view link, std::string_view signup_url, int days_valid) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = "You are invited to a gpuwerk team";
  m.text_body = fmt::format(
      "{} invited this address to join the gpuwerk team \"{}\". Members launch instances billed "
      "to the team, and the team's owners see each member's usage.\n\n"
      "To join, sign in to gpuwerk as {} and open this link:\n\n{}\n\n"
      "No account with this address yet? Sign up first at {} (with this address), then open "
      "the link. The link works once, only for this address, and expires in {} days. If you do "
      "not want to join, ignore this mail.\n\n-- gpuwerk\n",
      inviter, team_name, to, link, signup_url, days_valid);
  m.html_body = fmt::format(
      "<p>{} invited this address to join the gpuwerk team &quot;{}&quot;. Members launch "
      "instances billed to the team, and the team's owners see each member's usage.</p>"
      "<p>To join, sign in to gpuwerk as {} and open this link:</p>"
      "<p><a href=\"{}\">Join the team</a></p>"
      "<p>No account with this address yet? <a href=\"{}\">Sign up first</a> (with this "
      "address), then open the link. The link works once, only for this address, and expires in "
      "{} days. If you do not want to join, ignore this mail.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(inviter), core::HtmlEscape(team_name), core::HtmlEscape(to),
      core::HtmlEscape(link), core::HtmlEscape(signup_url), days_valid);
  return m;
}

mail::Mail RemovedFromTeamMail(std::string_view to, std::string_view team_name, std::string_view by,
                               std::string_view account_url) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = "You were removed from a gpuwerk team";
  m.text_body = fmt::format(
      "{} removed you from the gpuwerk team \"{}\". Your instances that were billed to the team "
      "were deleted, and from now on you are billed on your own: add a payment method at {} "
      "before you launch again.\n\n-- gpuwerk\n",
      by, team_name, account_url);
  m.html_body = fmt::format(
      "<p>{} removed you from the gpuwerk team &quot;{}&quot;. Your instances that were billed "
      "to the team were deleted, and from now on you are billed on your own: add a payment "
      "method at <a href=\"{}\">{}</a> before you launch again.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(by), core::HtmlEscape(team_name), core::HtmlEscape(account_url),
      core::HtmlEscape(account_url));
  return m;
}

}  // namespace gpuwerk::teams
