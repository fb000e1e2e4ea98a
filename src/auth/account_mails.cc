#include "auth/account_mails.h"

#include <fmt/format.h>

#include "core/encoding.h"

namespace gpuwerk::auth {
namespace {

mail::Mail LinkMail(std::string_view to, std::string_view subject, std::string_view intro,
                    std::string_view button, std::string_view link, int minutes_valid) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = std::string(subject);
  m.text_body = fmt::format(
      "{}\n\n{}\n\nThe link works once and expires in {} minutes. If you did not ask for it, "
      "ignore this mail.\n\n-- gpuwerk\n",
      intro, link, minutes_valid);
  m.html_body = fmt::format(
      "<p>{}</p><p><a href=\"{}\">{}</a></p><p>The link works once and expires in {} minutes. "
      "If you did not ask for it, ignore this mail.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(intro), core::HtmlEscape(link), core::HtmlEscape(button), minutes_valid);
  return m;
}

}  // namespace

mail::Mail MagicLinkMail(std::string_view to, std::string_view link, int minutes_valid) {
  return LinkMail(to, "Your gpuwerk sign-in link",
                  "Open this link to sign in to gpuwerk:", "Sign in to gpuwerk", link,
                  minutes_valid);
}

mail::Mail PasswordResetMail(std::string_view to, std::string_view link, int minutes_valid) {
  return LinkMail(to, "Set your gpuwerk password",
                  "Open this link to set a new password:", "Set a new password", link,
                  minutes_valid);
}

mail::Mail NoAccountMail(std::string_view to, std::string_view signup_url) {
  mail::Mail m;
  m.to = std::string(to);
  m.subject = "gpuwerk: no account for this address";
  m.text_body = fmt::format(
      "Someone asked for a gpuwerk sign-in or password link for this address, but there is no "
      "account for it. To create one, sign up at:\n\n{}\n\nIf it was not you, ignore this "
      "mail.\n\n-- gpuwerk\n",
      signup_url);
  m.html_body = fmt::format(
      "<p>Someone asked for a gpuwerk sign-in or password link for this address, but there is "
      "no account for it.</p><p><a href=\"{}\">Sign up</a></p><p>If it was not you, ignore "
      "this mail.</p><p>-- gpuwerk</p>",
      core::HtmlEscape(signup_url));
  return m;
}

}  // namespace gpuwerk::auth
