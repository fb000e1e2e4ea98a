#include "auth/account_mails.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/encoding.h"

namespace gpuwerk::auth {
namespace {

/// A mail with one link: `intro`, the link, then `expiry` ("The link works once and expires
/// in …") and `outro`.
mail::Mail LinkMail(std::string_view to, std::string_view subject, std::string_view intro,
                    std::string_view button, std::string_view link, std::string_view expiry,
                    std::string_view outro = "If you did not ask for it, ignore this mail.") {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = std::string(subject);
  m.text_body = fmt::format("{}\n\n{}\n\nThe link works once and expires in {}. {}\n\n-- gpuwerk\n",
                            intro, link, expiry, outro);
  m.html_body = fmt::format(
      "<p>{}</p><p><a href=\"{}\">{}</a></p><p>The link works once and expires in {}. {}</p>"
      "<p>-- gpuwerk</p>",
      core::HtmlEscape(intro), core::HtmlEscape(link), core::HtmlEscape(button),
      core::HtmlEscape(expiry), core::HtmlEscape(outro));
  return m;
}

std::string Minutes(int minutes) { return fmt::format("{} minutes", minutes); }

}  // namespace

mail::Mail MagicLinkMail(std::string_view to, std::string_view link, int minutes_valid) {
  return LinkMail(to, "Your gpuwerk sign-in link",
                  "Open this link to sign in to gpuwerk:", "Sign in to gpuwerk", link,
                  Minutes(minutes_valid));
}

mail::Mail PasswordResetMail(std::string_view to, std::string_view link, int minutes_valid) {
  return LinkMail(to, "Set your gpuwerk password",
                  "Open this link to set a new password:", "Set a new password", link,
                  Minutes(minutes_valid));
}

mail::Mail AddressProofMail(std::string_view to, std::string_view link, int hours_valid) {
  return LinkMail(to, "Confirm your gpuwerk address",
                  "Someone signed up for gpuwerk with this address. Open this link to confirm "
                  "that it is yours and set the account's password:",
                  "Confirm the address", link, fmt::format("{} hours", hours_valid),
                  "Whoever confirms the address owns the account: its earlier password, API "
                  "tokens and SSH keys are removed. If you did not sign up, ignore this mail; the "
                  "account can do nothing until the address is confirmed.");
}

mail::Mail SignUpAttemptMail(std::string_view to, std::string_view sign_in_url) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = "gpuwerk: someone tried to sign up with your address";
  m.text_body = fmt::format(
      "Someone tried to sign up for gpuwerk with this address, which already has an account. "
      "Nothing was changed.\n\nIf it was you, sign in at {} (use \"forgot password\" there if "
      "you do not know the password). If it was not you, ignore this mail.\n\n-- gpuwerk\n",
      sign_in_url);
  m.html_body = fmt::format(
      "<p>Someone tried to sign up for gpuwerk with this address, which already has an account. "
      "Nothing was changed.</p><p>If it was you, <a href=\"{}\">sign in</a> (use \"forgot "
      "password\" there if you do not know the password). If it was not you, ignore this "
      "mail.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(sign_in_url));
  return m;
}

mail::Mail NoAccountMail(std::string_view to, std::string_view signup_url, bool invite_only) {
  const std::string how = invite_only ? std::string(
                                            "Accounts here are by invitation: ask the operator "
                                            "to invite this address.")
                                      : fmt::format("To create one, sign up at: {}", signup_url);
  mail::Mail m;
  m.to = std::string(to);
  m.subject = "gpuwerk: no account for this address";
  m.text_body = fmt::format(
      "Someone asked for a gpuwerk sign-in or password link for this address, but there is no "
      "account for it. {}\n\nIf it was not you, ignore this mail.\n\n-- gpuwerk\n",
      how);
  m.html_body = fmt::format(
      "<p>Someone asked for a gpuwerk sign-in or password link for this address, but there is "
      "no account for it.</p><p>{}</p><p>If it was not you, ignore this mail.</p>"
      "<p>-- gpuwerk</p>",
      invite_only ? core::HtmlEscape(how)
                  : fmt::format("<a href=\"{}\">Sign up</a>", core::HtmlEscape(signup_url)));
  return m;
}

mail::Mail InviteMail(std::string_view to, std::string_view link, int days_valid) {
  return LinkMail(to, "You are invited to gpuwerk",
                  "You are invited to gpuwerk. Open this link to set your password and sign in:",
                  "Accept the invitation", link, fmt::format("{} days", days_valid),
                  "If you do not want an account, ignore this mail.");
}

namespace {

/// A plain notice: `paragraphs` in the text body and, escaped, in the HTML body.
mail::Mail Notice(std::string_view to, std::string_view subject,
                  const std::vector<std::string>& paragraphs) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = std::string(subject);
  for (const auto& p : paragraphs) {
    m.text_body += p + "\n\n";
    m.html_body += "<p>" + core::HtmlEscape(p) + "</p>";
  }
  m.text_body += "-- gpuwerk\n";
  m.html_body += "<p>-- gpuwerk</p>";
  return m;
}

}  // namespace

mail::Mail ApiTokenCreatedMail(std::string_view to, std::string_view name, std::string_view prefix,
                               std::string_view expires, std::string_view source_address,
                               std::string_view account_url) {
  return Notice(
      to, "gpuwerk: a new API token for your account",
      {fmt::format("An API token named \"{}\" ({}…) was made for your gpuwerk account from {}. "
                   "{}",
                   name, prefix, source_address,
                   expires.empty() ? std::string("It does not expire.")
                                   : fmt::format("It expires at {}.", expires)),
       fmt::format("If this was not you, delete the token (gpuwerk tokens, or {}) and set a new "
                   "password: a new password ends every API token of the account.",
                   account_url)});
}

mail::Mail PasswordChangedMail(std::string_view to, std::string_view source_address,
                               std::string_view reset_url) {
  return Notice(to, "gpuwerk: your password was changed",
                {fmt::format("The password of your gpuwerk account was changed from {}. Every "
                             "other sign-in and API token of the account was ended.",
                             source_address),
                 fmt::format("If this was not you, set a new password at once: {}", reset_url)});
}

}  // namespace gpuwerk::auth
