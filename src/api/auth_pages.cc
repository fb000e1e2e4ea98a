// The pages that mailed links open (R-1, C26): a GET only shows a page with a button, so a mail
// scanner that fetches every link uses nothing up; the button's form POST consumes the token.
// Server-rendered, no script; the dashboard (web/) links here and takes over at "/" after.
#include <fmt/format.h>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "core/encoding.h"

namespace gpuwerk::api {
namespace {

Response Page(int status, std::string_view title, std::string_view body) {
  Response r = Response::Html(
      status,
      fmt::format(
          "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
          "<meta name=\"referrer\" content=\"same-origin\"><title>{} · gpuwerk</title>"
          "<style>body{{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;"
          "padding:0 1rem;color:#1b1f24}}h1{{font-size:1.4rem}}input,button{{font:inherit;"
          "padding:.5rem;width:100%;box-sizing:border-box;margin:.25rem 0}}button{{cursor:pointer;"
          "background:#1b1f24;color:#fff;border:0;border-radius:4px}}.error{{color:#b00020}}"
          "form{{margin:1rem 0}}</style></head><body><h1>{}</h1>{}</body></html>",
          core::HtmlEscape(title), core::HtmlEscape(title), body));
  r.SetHeader("Cache-Control", "no-store");
  r.SetHeader("Content-Security-Policy",
              "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
              "frame-ancestors 'none'");
  return r;
}

std::string HiddenToken(std::string_view token) {
  return fmt::format("<input type=\"hidden\" name=\"token\" value=\"{}\">",
                     core::HtmlEscape(token));
}

/// The page a mailed link opens: `form` (a format string whose `{}` takes the hidden token field)
/// under `title`, or a 400 page titled `missing_title` when the link has no token.
Response LinkPage(const Request& req, std::string_view missing_title, std::string_view title,
                  fmt::format_string<std::string> form) {
  auto it = req.query.find("token");
  if (it == req.query.end() || it->second.empty()) {
    return Page(400, missing_title,
                "<p class=\"error\">This link has no token. Ask for a new one.</p>");
  }
  return Page(200, title, fmt::format(form, HiddenToken(it->second)));
}

/// The form fields of an application/x-www-form-urlencoded body.
std::map<std::string, std::string> FormFields(const Request& req) {
  return ParseQuery(req.body).value_or(std::map<std::string, std::string>{});
}

std::string Field(const std::map<std::string, std::string>& f, const std::string& name) {
  auto it = f.find(name);
  return it == f.end() ? "" : it->second;
}

}  // namespace

Response LinkPageHtml(int status, std::string_view title, std::string_view html_body) {
  return Page(status, title, html_body);
}

namespace handlers {

Answer MagicLinkPage(ApiContext&, Call& call) {
  return LinkPage(call.req, "Sign-in link", "Sign in to gpuwerk",
                  "<p>Press the button to finish signing in.</p>"
                  "<form method=\"post\" action=\"/auth/magic-link\">{}"
                  "<button type=\"submit\">Sign in</button></form>");
}

Answer MagicLinkForm(ApiContext& ctx, Call& call) {
  const Request& req = call.req;
  if (auto ok = ctx.authn.CheckOrigin(req); !ok) {
    return Page(403, "Sign-in link", "<p class=\"error\">This request came from another site.</p>");
  }
  auto fields = FormFields(req);
  auto s = ctx.accounts.ConsumeMagicLink(Field(fields, "token"), Authenticator::CallerOf(req));
  if (!s) {
    return Page(400, "Sign-in link",
                fmt::format("<p class=\"error\">{}</p><p><a href=\"/\">Back to sign in</a></p>",
                            core::HtmlEscape(s.error().message)));
  }
  Response r = Response::Redirect("/");
  r.AddHeader("Set-Cookie", ctx.authn.SessionCookie(*s, ctx.clock.NowUnix()));
  return r;
}

Answer ResetPasswordPage(ApiContext&, Call& call) {
  return LinkPage(call.req, "Set a password", "Set a new password",
                  "<form method=\"post\" action=\"/auth/reset-password\">{}"
                  "<label>New password (at least 8 characters)"
                  "<input type=\"password\" name=\"password\" minlength=\"8\" required "
                  "autocomplete=\"new-password\"></label>"
                  "<button type=\"submit\">Set password</button></form>");
}

Answer ResetPasswordForm(ApiContext& ctx, Call& call) {
  const Request& req = call.req;
  if (auto ok = ctx.authn.CheckOrigin(req); !ok) {
    return Page(403, "Set a password",
                "<p class=\"error\">This request came from another site.</p>");
  }
  auto fields = FormFields(req);
  auto p = ctx.accounts.ResetPassword(Field(fields, "token"), Field(fields, "password"),
                                      Authenticator::CallerOf(req));
  if (!p) {
    std::string retry;
    if (p.error().api_code == "weak_password") {
      retry = fmt::format("<p><a href=\"/auth/reset-password?token={}\">Try again</a></p>",
                          core::HtmlEscape(Field(fields, "token")));
    }
    return Page(
        400, "Set a password",
        fmt::format("<p class=\"error\">{}</p>{}", core::HtmlEscape(p.error().message), retry));
  }
  Response r =
      Page(200, "Password set",
           "<p>Your new password is set. Every sign-in and API token of the account was ended.</p>"
           "<p><a href=\"/\">Sign in</a></p>");
  r.AddHeader("Set-Cookie", ctx.authn.ClearedSessionCookie());
  return r;
}

Answer AddressProofPage(ApiContext&, Call& call) {
  return LinkPage(call.req, "Confirm your address", "Confirm your address",
                  "<p>One step left: type your password to confirm that this address is yours "
                  "and sign in. Use the one you chose at sign-up, or choose one now if an "
                  "operator invited you.</p>"
                  "<p>Why again: whoever opens this mailed link owns the account, so the account "
                  "keeps the password typed here, and any other password, API tokens and SSH keys "
                  "set on it before are removed.</p>"
                  "<form method=\"post\" action=\"/auth/prove-address\">{}"
                  "<label>Password (at least 8 characters)"
                  "<input type=\"password\" name=\"password\" minlength=\"8\" required "
                  "autocomplete=\"new-password\"></label>"
                  "<button type=\"submit\">Confirm and sign in</button></form>");
}

Answer AddressProofForm(ApiContext& ctx, Call& call) {
  const Request& req = call.req;
  if (auto ok = ctx.authn.CheckOrigin(req); !ok) {
    return Page(403, "Confirm your address",
                "<p class=\"error\">This request came from another site.</p>");
  }
  auto fields = FormFields(req);
  auto s = ctx.accounts.ProveAddress(Field(fields, "token"), Field(fields, "password"),
                                     Authenticator::CallerOf(req));
  if (!s) {
    std::string retry;
    if (s.error().api_code == "weak_password" || s.error().api_code == "invalid_password") {
      retry = fmt::format("<p><a href=\"/auth/prove-address?token={}\">Try again</a></p>",
                          core::HtmlEscape(Field(fields, "token")));
    }
    return Page(
        400, "Confirm your address",
        fmt::format("<p class=\"error\">{}</p>{}", core::HtmlEscape(s.error().message), retry));
  }
  Response r = Response::Redirect("/");
  r.AddHeader("Set-Cookie", ctx.authn.SessionCookie(*s, ctx.clock.NowUnix()));
  return r;
}

}  // namespace handlers
}  // namespace gpuwerk::api
