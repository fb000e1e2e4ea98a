// /api/v1/auth/* and /api/v1/me.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace gpuwerk::api::handlers {
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

/// Mails a link to the body's `email` with `request` (a magic link, a password reset): always
/// 202, whether or not the address has an account (no enumeration).
Answer MailLink(ApiContext& ctx, Call& call,
                core::Result<void> (auth::AccountService::*request)(std::string_view,
                                                                    const auth::Caller&)) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"email"}));
  GPUWERK_ASSIGN_OR_RETURN(auto email, RequireString(body, "email", 320));
  GPUWERK_TRY((ctx.accounts.*request)(email, Authenticator::CallerOf(call.req)));
  return Accepted();
}

/// The {email, password} of a sign-up or a sign-in.
struct Credentials {
  std::string email;
  std::string password;
};

core::Result<Credentials> CredentialsFrom(const nlohmann::json& body) {
  Credentials c;
  GPUWERK_ASSIGN_OR_RETURN(c.email, RequireString(body, "email", 320));
  GPUWERK_ASSIGN_OR_RETURN(c.password, RequireString(body, "password", 4096));
  return c;
}

}  // namespace

Answer SignUp(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.authn.CheckOrigin(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"email", "password"}));
  GPUWERK_ASSIGN_OR_RETURN(auto c, CredentialsFrom(body));
  GPUWERK_TRY(ctx.accounts.SignUp(c.email, c.password, Authenticator::CallerOf(call.req)));
  // The same answer whether or not the address has an account (docs/accounts.md "Sign-up").
  return Response::Json(
      202, {{"status", "accepted"},
            {"message",
             "Check your mail: open the link in it to confirm the address and set your "
             "password. If the address already has an account, the mail says how to sign in."}});
}

Answer ConsumeAddressProof(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.authn.CheckOrigin(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"token", "password"}));
  GPUWERK_ASSIGN_OR_RETURN(auto token, RequireString(body, "token", 256));
  GPUWERK_ASSIGN_OR_RETURN(auto password, RequireString(body, "password", 4096));
  GPUWERK_ASSIGN_OR_RETURN(
      auto s, ctx.accounts.ProveAddress(token, password, Authenticator::CallerOf(call.req)));
  return SignedIn(ctx, s, 200);
}

Answer LogIn(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.authn.CheckOrigin(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"email", "password"}));
  GPUWERK_ASSIGN_OR_RETURN(auto c, CredentialsFrom(body));
  GPUWERK_ASSIGN_OR_RETURN(auto s, ctx.accounts.SignInWithPassword(
                                       c.email, c.password, Authenticator::CallerOf(call.req)));
  return SignedIn(ctx, s, 200);
}

Answer LogOut(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.authn.CheckOrigin(call.req));
  std::string token = call.req.Cookie(ctx.authn.session_cookie_name());
  if (!token.empty()) GPUWERK_TRY(ctx.accounts.SignOut(token, Authenticator::CallerOf(call.req)));
  Response r = Response::NoContent();
  r.headers.emplace_back("Set-Cookie", ctx.authn.ClearedSessionCookie());
  return r;
}

Answer RequestMagicLink(ApiContext& ctx, Call& call) {
  return MailLink(ctx, call, &auth::AccountService::RequestMagicLink);
}

Answer ConsumeMagicLink(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.authn.CheckOrigin(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"token"}));
  GPUWERK_ASSIGN_OR_RETURN(auto token, RequireString(body, "token", 256));
  GPUWERK_ASSIGN_OR_RETURN(auto s,
                           ctx.accounts.ConsumeMagicLink(token, Authenticator::CallerOf(call.req)));
  return SignedIn(ctx, s, 200);
}

Answer RequestPasswordReset(ApiContext& ctx, Call& call) {
  return MailLink(ctx, call, &auth::AccountService::RequestPasswordReset);
}

Answer ConsumePasswordReset(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(ctx.authn.CheckOrigin(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"token", "password"}));
  GPUWERK_ASSIGN_OR_RETURN(auto token, RequireString(body, "token", 256));
  GPUWERK_ASSIGN_OR_RETURN(auto password, RequireString(body, "password", 4096));
  GPUWERK_ASSIGN_OR_RETURN(
      auto p, ctx.accounts.ResetPassword(token, password, Authenticator::CallerOf(call.req)));
  Response r = Response::Json(
      200, {{"person", PersonJson(p)}, {"message", "Password set. Sign in with it."}});
  r.headers.emplace_back("Set-Cookie", ctx.authn.ClearedSessionCookie());
  return r;
}

Answer ChangePassword(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body,
                           ParseJsonObject(call.req, {"current_password", "new_password"}));
  GPUWERK_ASSIGN_OR_RETURN(auto current, RequireString(body, "current_password", 4096));
  GPUWERK_ASSIGN_OR_RETURN(auto password, RequireString(body, "new_password", 4096));
  GPUWERK_TRY(
      ctx.accounts.ChangePassword(call.who, current, password, Authenticator::CallerOf(call.req)));
  return Response::Json(
      200, {{"message", "Password changed. Every other sign-in and API token was ended."}});
}

Answer AdminInvite(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"email"}));
  GPUWERK_ASSIGN_OR_RETURN(auto email, RequireString(body, "email", 320));
  GPUWERK_ASSIGN_OR_RETURN(int64_t expires_at,
                           ctx.accounts.Invite(call.who, email, Authenticator::CallerOf(call.req)));
  return Response::Json(201, {{"email", std::string(core::Trim(email, core::kWhitespace))},
                              {"expires_at", core::FormatRfc3339(expires_at)}});
}

Answer GetMe(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto p, ctx.accounts.GetPerson(call.who.person_id));
  nlohmann::json j = PersonJson(p);
  j["team"] = nullptr;
  j["role"] = nullptr;
  if (ctx.teams) {
    auto team = ctx.teams->Get(call.who);
    if (team) {
      j["team"] = {{"id", team->team.id}, {"name", team->team.name}};
      j["role"] = std::string(teams::RoleName(team->my_role));
    } else if (team.error().api_code != "no_team") {
      return core::Fail(team.error());
    }
  }
  // whether launches and restarts are possible (the dashboard's red banner when not).
  GPUWERK_ASSIGN_OR_RETURN(auto state, ctx.payment_methods.State(call.who.person_id));
  j["billing"] = {{"account",
                   {{"id", state.account.id},
                    {"kind", std::string(billing::ToString(state.account.kind))},
                    {"name", state.account.name}}},
                  {"provider", state.provider},
                  {"payment_method_on_file", state.method.has_value()},
                  // What refuses launches: the account's hold, else the person's own (a failed
                  // payment of their solo account follows them into a team).
                  {"payment_hold", PaymentHoldJson(state.hold ? state.hold : state.own_hold)},
                  {"own_payment_hold", PaymentHoldJson(state.own_hold)}};
  j["authenticated_by"] =
      call.who.via == auth::CredentialKind::kApiToken ? "api_token" : "sign_in_session";
  return Response::Json(200, j);
}

}  // namespace gpuwerk::api::handlers
