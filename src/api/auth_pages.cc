// The pages that mailed links open (R-1, C26): a GET only shows a page with a button, so a mail
// scanner that fetches every link uses nothing up; the button's form POST consumes the token.
// Plus a plain sign-in page at "/" until the dashboard lands. Server-rendered, no script.
#include <fmt/format.h>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/router.h"
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

/// The form fields of an application/x-www-form-urlencoded body.
std::map<std::string, std::string> FormFields(const Request& req) {
  return ParseQuery(req.body).value_or(std::map<std::string, std::string>{});
}

std::string Field(const std::map<std::string, std::string>& f, const std::string& name) {
  auto it = f.find(name);
  return it == f.end() ? "" : it->second;
}

}  // namespace

void RegisterAuthPages(Router& router, ApiContext& ctx) {
  router.Add("GET", "/auth/magic-link", [](Request& req) {
    auto it = req.query.find("token");
    if (it == req.query.end() || it->second.empty()) {
      return Page(400, "Sign-in link",
                  "<p class=\"error\">This link has no token. Ask for a new one.</p>");
    }
    return Page(200, "Sign in to gpuwerk",
                fmt::format("<p>Press the button to finish signing in.</p>"
                            "<form method=\"post\" action=\"/auth/magic-link\">{}"
                            "<button type=\"submit\">Sign in</button></form>",
                            HiddenToken(it->second)));
  });

  router.Add("POST", "/auth/magic-link", [&ctx](Request& req) {
    if (auto ok = ctx.authn.CheckOrigin(req); !ok) {
      return Page(403, "Sign-in link",
                  "<p class=\"error\">This request came from another site.</p>");
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
  });

  router.Add("GET", "/auth/reset-password", [](Request& req) {
    auto it = req.query.find("token");
    if (it == req.query.end() || it->second.empty()) {
      return Page(400, "Set a password",
                  "<p class=\"error\">This link has no token. Ask for a new one.</p>");
    }
    return Page(200, "Set a new password",
                fmt::format("<form method=\"post\" action=\"/auth/reset-password\">{}"
                            "<label>New password (at least 8 characters)"
                            "<input type=\"password\" name=\"password\" minlength=\"8\" required "
                            "autocomplete=\"new-password\"></label>"
                            "<button type=\"submit\">Set password</button></form>",
                            HiddenToken(it->second)));
  });

  router.Add("POST", "/auth/reset-password", [&ctx](Request& req) {
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
    Response r = Page(200, "Password set",
                      "<p>Your new password is set, and every other sign-in was ended.</p>"
                      "<p><a href=\"/\">Sign in</a></p>");
    r.AddHeader("Set-Cookie", ctx.authn.ClearedSessionCookie());
    return r;
  });
}

}  // namespace gpuwerk::api
