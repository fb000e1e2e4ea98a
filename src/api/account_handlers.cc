// /api/v1/auth/* and /api/v1/me.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/router.h"

namespace gpuwerk::api {
namespace {

/// 201/200 with the person and the session cookie.
Response SignedIn(ApiContext& ctx, const auth::SignIn& s, int status) {
  Response r = Response::Json(status, {{"person", PersonJson(s.person)},
                                       {"expires_at", core::FormatRfc3339(s.expires_at)}});
  r.headers.emplace_back("Set-Cookie", ctx.authn.SessionCookie(s, ctx.clock.NowUnix()));
  return r;
}

Response Accepted() {
  return Response::Json(202, {{"status", "accepted"},
                              {"message", "If the address has an account, a mail is on its way."}});
}

}  // namespace

void RegisterAccountRoutes(Router& router, ApiContext& ctx) {
  router.Add("POST", "/api/v1/auth/signup", [&ctx](Request& req) {
    if (auto ok = ctx.authn.CheckOrigin(req); !ok) return ErrorResponse(ok.error());
    return WithJsonBody(req, [&](const nlohmann::json& body) {
      auto email = RequireString(body, "email", 320);
      if (!email) return ErrorResponse(email.error());
      auto password = RequireString(body, "password", 4096);
      if (!password) return ErrorResponse(password.error());
      auto s = ctx.accounts.SignUp(*email, *password, Authenticator::CallerOf(req));
      if (!s) return ErrorResponse(s.error());
      return SignedIn(ctx, *s, 201);
    });
  });

  router.Add("POST", "/api/v1/auth/login", [&ctx](Request& req) {
    if (auto ok = ctx.authn.CheckOrigin(req); !ok) return ErrorResponse(ok.error());
    return WithJsonBody(req, [&](const nlohmann::json& body) {
      auto email = RequireString(body, "email", 320);
      if (!email) return ErrorResponse(email.error());
      auto password = RequireString(body, "password", 4096);
      if (!password) return ErrorResponse(password.error());
      auto s = ctx.accounts.SignInWithPassword(*email, *password, Authenticator::CallerOf(req));
      if (!s) return ErrorResponse(s.error());
      return SignedIn(ctx, *s, 200);
    });
  });

  router.Add("POST", "/api/v1/auth/logout", [&ctx](Request& req) {
    if (auto ok = ctx.authn.CheckOrigin(req); !ok) return ErrorResponse(ok.error());
    std::string token = req.Cookie(std::string(kSessionCookie));
    if (!token.empty()) {
      if (auto r = ctx.accounts.SignOut(token, Authenticator::CallerOf(req)); !r) {
        return ErrorResponse(r.error());
      }
    }
    Response r = Response::NoContent();
    r.headers.emplace_back("Set-Cookie", ctx.authn.ClearedSessionCookie());
    return r;
  });

  router.Add("POST", "/api/v1/auth/magic-link", [&ctx](Request& req) {
    return WithJsonBody(req, [&](const nlohmann::json& body) {
      auto email = RequireString(body, "email", 320);
      if (!email) return ErrorResponse(email.error());
      if (auto r = ctx.accounts.RequestMagicLink(*email, Authenticator::CallerOf(req)); !r) {
        return ErrorResponse(r.error());
      }
      return Accepted();
    });
  });

  router.Add("POST", "/api/v1/auth/magic-link/consume", [&ctx](Request& req) {
    if (auto ok = ctx.authn.CheckOrigin(req); !ok) return ErrorResponse(ok.error());
    return WithJsonBody(req, [&](const nlohmann::json& body) {
      auto token = RequireString(body, "token", 256);
      if (!token) return ErrorResponse(token.error());
      auto s = ctx.accounts.ConsumeMagicLink(*token, Authenticator::CallerOf(req));
      if (!s) return ErrorResponse(s.error());
      return SignedIn(ctx, *s, 200);
    });
  });

  router.Add("POST", "/api/v1/auth/password-reset", [&ctx](Request& req) {
    return WithJsonBody(req, [&](const nlohmann::json& body) {
      auto email = RequireString(body, "email", 320);
      if (!email) return ErrorResponse(email.error());
      if (auto r = ctx.accounts.RequestPasswordReset(*email, Authenticator::CallerOf(req)); !r) {
        return ErrorResponse(r.error());
      }
      return Accepted();
    });
  });

  router.Add("POST", "/api/v1/auth/password-reset/consume", [&ctx](Request& req) {
    if (auto ok = ctx.authn.CheckOrigin(req); !ok) return ErrorResponse(ok.error());
    return WithJsonBody(req, [&](const nlohmann::json& body) {
      auto token = RequireString(body, "token", 256);
      if (!token) return ErrorResponse(token.error());
      auto password = RequireString(body, "password", 4096);
      if (!password) return ErrorResponse(password.error());
      auto p = ctx.accounts.ResetPassword(*token, *password, Authenticator::CallerOf(req));
      if (!p) return ErrorResponse(p.error());
      Response r = Response::Json(
          200, {{"person", PersonJson(*p)}, {"message", "Password set. Sign in with it."}});
      r.headers.emplace_back("Set-Cookie", ctx.authn.ClearedSessionCookie());
      return r;
    });
  });

  router.Add("GET", "/api/v1/me", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto p = ctx.accounts.GetPerson(who.person_id);
      if (!p) return ErrorResponse(p.error());
      nlohmann::json j = PersonJson(*p);
      j["team"] = nullptr;
      j["role"] = nullptr;
      j["billing"] = {{"account", "solo"}, {"payment_method_on_file", false}};
      j["authenticated_by"] =
          who.via == auth::CredentialKind::kApiToken ? "api_token" : "sign_in_session";
      return Response::Json(200, j);
    });
  });
}

}  // namespace gpuwerk::api
