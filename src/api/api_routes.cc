// The route table: every route of the server (besides /healthz, /metrics and the dashboard's
// files, api/dashboard.h), who may call it, and its handler. Authentication per access level and
// the error → problem JSON answer happen here, once (RegisterApiRoutes).
#include "api/api_routes.h"

#include <algorithm>
#include <array>
#include <boost/asio/ip/address.hpp>
#include <string>

#include "access/relay_credentials.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "api/router.h"

namespace gpuwerk::api {
namespace {

using enum Access;
namespace h = handlers;

constexpr auto kRoutes = std::to_array<ApiRoute>({
    // Accounts and sign-in (R-1, R-2, R-3; docs/api.md "Accounts").
    {"POST", "/api/v1/auth/signup", kPublic, h::SignUp},
    {"POST", "/api/v1/auth/prove-address/consume", kPublic, h::ConsumeAddressProof},
    {"POST", "/api/v1/auth/login", kPublic, h::LogIn},
    {"POST", "/api/v1/auth/logout", kPublic, h::LogOut, Tx::kOwn, Body::kNone},
    {"POST", "/api/v1/auth/magic-link", kPublic, h::RequestMagicLink},
    {"POST", "/api/v1/auth/magic-link/consume", kPublic, h::ConsumeMagicLink},
    {"POST", "/api/v1/auth/password-reset", kPublic, h::RequestPasswordReset},
    {"POST", "/api/v1/auth/password-reset/consume", kPublic, h::ConsumePasswordReset},
    {"GET", "/api/v1/me", kPerson, h::GetMe},
    // A change voids every link of the person and mails a notice: an unproven account's holder
    // may be a squatter, so only a proven person may (docs/accounts.md "Address proof").
    {"POST", "/api/v1/me/password", kProvenPerson, h::ChangePassword},
    // The pages mailed links open: a GET shows a button, its form POST consumes the token.
    {"GET", "/auth/magic-link", kPublic, h::MagicLinkPage},
    {"POST", "/auth/magic-link", kPublic, h::MagicLinkForm},
    {"GET", "/auth/reset-password", kPublic, h::ResetPasswordPage},
    {"POST", "/auth/reset-password", kPublic, h::ResetPasswordForm},
    {"GET", "/auth/prove-address", kPublic, h::AddressProofPage},
    {"POST", "/auth/prove-address", kPublic, h::AddressProofForm},

    // Personal API tokens and SSH keys.
    {"GET", "/api/v1/tokens", kPerson, h::ListTokens},
    {"POST", "/api/v1/tokens", kProvenPerson, h::CreateToken},
    {"DELETE", "/api/v1/tokens/{id}", kPerson, h::DeleteToken},
    {"GET", "/api/v1/ssh-keys", kPerson, h::ListSshKeys, Tx::kOneRead},
    {"POST", "/api/v1/ssh-keys", kProvenPerson, h::AddSshKey},
    // Proof of possession: a signed challenge takes a key over from an account that never
    // proved it (docs/ssh-keys.md "Proof of possession").
    {"POST", "/api/v1/ssh-keys/claim-challenge", kProvenPerson, h::SshKeyClaimChallenge},
    {"POST", "/api/v1/ssh-keys/claim", kProvenPerson, h::ClaimSshKey},
    {"DELETE", "/api/v1/ssh-keys/{id}", kPerson, h::DeleteSshKey},

    // Instances, GPU types and the queue.
    {"GET", "/api/v1/instances", kPerson, h::ListInstances},
    {"POST", "/api/v1/instances", kProvenPerson, h::CreateInstance},
    {"GET", "/api/v1/instances/{id}", kPerson, h::GetInstance},
    {"POST", "/api/v1/instances/{id}/restart", kProvenPerson, h::RestartInstance, Tx::kOwn,
     Body::kNone},
    {"DELETE", "/api/v1/instances/{id}", kPerson, h::DeleteInstance},
    {"GET", "/api/v1/instances/{id}/relay-sessions", kPerson, h::ListInstanceRelaySessions},
    {"GET", "/api/v1/gpu-types", kPerson, h::ListGpuTypes},
    {"GET", "/api/v1/queue-entries", kPerson, h::ListQueueEntries},
    {"POST", "/api/v1/queue-entries", kProvenPerson, h::JoinQueue},
    {"DELETE", "/api/v1/queue-entries/{id}", kPerson, h::LeaveQueue},
    {"GET", "/api/v1/usage/queue", kPerson, h::QueueHistory},
    // Invoices and the usage history (R-13, R-16; docs/billing.md).
    {"GET", "/api/v1/billing/invoices", kPerson, h::ListInvoices},
    {"GET", "/api/v1/usage/sessions", kPerson, h::UsageSessions},
    {"GET", "/api/v1/usage/daily", kPerson, h::UsageDaily},
    {"POST", "/api/v1/admin/invoices/close", kOperator, h::AdminCloseInvoices},
    {"GET", "/api/v1/admin/invoices/export", kOperator, h::AdminExportInvoices},
    {"GET", "/api/v1/events", kPerson, h::OpenEventStream},

    // Billing: the payment method that launches need (R-14; docs/billing.md).
    {"GET", "/api/v1/billing", kPerson, h::GetBilling},
    {"POST", "/api/v1/billing/card-setup", kProvenPerson, h::BeginCardSetup, Tx::kOwn, Body::kNone},
    {"DELETE", "/api/v1/billing/payment-method", kPerson, h::RemovePaymentMethod},
    // The caller's own (solo) card, also while they bill to a team (docs/teams.md "Billing").
    {"DELETE", "/api/v1/billing/own-payment-method", kPerson, h::RemoveOwnPaymentMethod},
    // Stripe's webhook: no credentials, the signature is the proof (docs/stripe.md "Webhooks").
    {"POST", "/api/v1/billing/webhooks/stripe", kPublic, h::StripeWebhook},

    // Operators: capacity, everyone's relay sessions, invitations, releasing a key.
    {"GET", "/api/v1/admin/gpu-types", kOperator, h::AdminListGpuTypes},
    {"PUT", "/api/v1/admin/gpu-types/{name}", kOperator, h::AdminPutGpuType},
    {"GET", "/api/v1/admin/hosts", kOperator, h::ListHosts},
    {"POST", "/api/v1/admin/hosts", kOperator, h::AddHost},
    {"PUT", "/api/v1/admin/hosts/{name}/ssh", kOperator, h::SetHostSsh},
    {"POST", "/api/v1/admin/hosts/{name}/drain", kOperator, h::DrainHost, Tx::kOwn, Body::kNone},
    {"POST", "/api/v1/admin/hosts/{name}/undrain", kOperator, h::UndrainHost, Tx::kOwn,
     Body::kNone},
    {"DELETE", "/api/v1/admin/hosts/{name}", kOperator, h::RemoveHost},
    {"GET", "/api/v1/admin/host-pairs", kOperator, h::ListHostPairs},
    {"POST", "/api/v1/admin/host-pairs", kOperator, h::LinkHostPair},
    {"DELETE", "/api/v1/admin/host-pairs/{id}", kOperator, h::UnlinkHostPair},
    {"GET", "/api/v1/admin/relay-sessions", kOperator, h::AdminListRelaySessions},
    // Relay credentials (docs/ssh.md "The relay's API credential"): the secret is shown once.
    {"GET", "/api/v1/admin/relays", kOperator, h::AdminListRelays},
    {"POST", "/api/v1/admin/relays", kOperator, h::AdminAddRelay},
    {"DELETE", "/api/v1/admin/relays/{name}", kOperator, h::AdminRevokeRelay},
    {"POST", "/api/v1/admin/invites", kOperator, h::AdminInvite},
    {"POST", "/api/v1/admin/ssh-keys/release", kOperator, h::AdminReleaseSshKey},
    // The manual provider: the operator records and clears payment methods (audited).
    {"PUT", "/api/v1/admin/billing/{email}/card", kOperator, h::AdminSetCard},
    {"DELETE", "/api/v1/admin/billing/{email}/card", kOperator, h::AdminClearCard},
    // The same for a team's billing account, named by its id (team_…) or exact name.
    {"PUT", "/api/v1/admin/billing/teams/{team}/card", kOperator, h::AdminSetTeamCard},
    {"DELETE", "/api/v1/admin/billing/teams/{team}/card", kOperator, h::AdminClearTeamCard},
    {"GET", "/api/v1/admin/audit", kOperator, h::AdminListAudit},
    // Everyone's instances, queues and people; the operator flag (audited; the last operator's
    // stays); the sign-up policy as configured (read only). docs/api.md "Operators".
    {"GET", "/api/v1/admin/instances", kOperator, h::AdminListInstances},
    {"GET", "/api/v1/admin/queue", kOperator, h::AdminListQueue},
    {"GET", "/api/v1/admin/people", kOperator, h::AdminListPeople},
    {"PUT", "/api/v1/admin/people/{email}/operator", kOperator, h::AdminSetOperator, Tx::kOwn,
     Body::kNone},
    {"DELETE", "/api/v1/admin/people/{email}/operator", kOperator, h::AdminClearOperator},
    {"GET", "/api/v1/admin/sign-up-policy", kOperator, h::AdminSignUpPolicy},

    // Teams (R-15; docs/teams.md): every role rule is TeamService's, whatever the credential.
    {"GET", "/api/v1/team", kPerson, h::GetTeam},
    {"GET", "/api/v1/team/usage", kPerson, h::GetTeamUsage},
    {"POST", "/api/v1/team", kProvenPerson, h::CreateTeam},
    {"POST", "/api/v1/team/invites", kProvenPerson, h::InviteToTeam},
    {"DELETE", "/api/v1/team/invites/{id}", kPerson, h::RevokeTeamInvite},
    {"POST", "/api/v1/team/invites/accept", kProvenPerson, h::AcceptTeamInvite},
    // What an invitation link is for (the dashboard's /team/accept page shows it before its
    // button accepts): anyone holding the link may read it, nothing is used up.
    {"POST", "/api/v1/team/invites/preview", kPublic, h::PreviewTeamInvite},
    {"DELETE", "/api/v1/team/members/{id}", kPerson, h::RemoveTeamMember},
    {"PUT", "/api/v1/team/members/{id}/role", kPerson, h::SetTeamRole},
    {"POST", "/api/v1/team/leave", kPerson, h::LeaveTeam, Tx::kOwn, Body::kNone},

    // Host agents (docs/agent-protocol.md).
    {"POST", "/api/v1/agent/sync", kAgent, h::AgentSync},
    {"GET", "/api/v1/agent/watch", kAgent, h::AgentWatch},

    // Relays, by their relay credential (docs/ssh.md).
    {"POST", "/api/v1/relay/authorize", kRelay, h::AuthorizeRelayLogin},
    {"PUT", "/api/v1/relay/sessions/{id}", kRelay, h::ReportRelaySession},
    {"POST", "/api/v1/relay/restarted", kRelay, h::RelayRestarted},
    {"POST", "/api/v1/relay/refusals", kRelay, h::ReportRelayRefusals},
    {"POST", "/api/v1/relay/recheck", kRelay, h::RecheckRelaySessions},
    {"GET", "/api/v1/relay/watch", kRelay, h::WatchRelayAccess},
});

/// The bearer token of `Authorization: Bearer …` (scheme case-insensitive), "" when absent.
std::string_view BearerToken(const Request& req) {
  constexpr std::string_view kBearer = "bearer ";
  std::string_view authz = req.Header("Authorization");
  if (authz.size() > kBearer.size() && EqualsIgnoreCase(authz.substr(0, kBearer.size()), kBearer)) {
    return authz.substr(kBearer.size());
  }
  return {};
}

/// Authenticates `call` for `level`: fills call.who, call.host or call.relay. Inside call.tx when
/// there is one (the caller records an API token's use after it).
core::Result<void> Admit(ApiContext& ctx, Access level, Call& call) {
  const std::string_view bearer = BearerToken(call.req);
  // A relay credential opens the relay's routes and nothing else (issue 12 finding 8).
  if (level != kRelay && access::LooksLikeRelayCredential(bearer)) {
    return core::Fail(core::ErrorCode::kPermissionDenied, "relay_credential_not_allowed",
                      "A relay credential opens the relay's routes (/api/v1/relay/...) only; "
                      "use an API token here.");
  }
  switch (level) {
    case kPublic:
      return {};
    case kRelay: {
      if (!access::LooksLikeRelayCredential(bearer)) {
        if (call.req.Header("Authorization").empty() && call.req.Header("Cookie").empty()) {
          return core::Fail(core::ErrorCode::kUnauthenticated, "unauthenticated",
                            "A relay credential is required: 'Authorization: Bearer gwr_...' "
                            "(gpuwerk admin relays add NAME).");
        }
        return core::Fail(core::ErrorCode::kPermissionDenied, "relay_credential_required",
                          "Only a relay, by its relay credential (gwr_..., from 'gpuwerk admin "
                          "relays add NAME'), may do this; API tokens and sign-ins may not.");
      }
      GPUWERK_ASSIGN_OR_RETURN(call.relay, ctx.relay_credentials.Authenticate(bearer));
      return {};
    }
    case kAgent: {
      GPUWERK_ASSIGN_OR_RETURN(call.host, ctx.hosts.AuthenticateAgent(BearerToken(call.req)));
      return {};
    }
    case kPerson:
    case kProvenPerson:
    case kOperator: {
      if (call.tx) {
        GPUWERK_ASSIGN_OR_RETURN(call.who, ctx.authn.Authenticate(call.req, *call.tx));
      } else {
        GPUWERK_ASSIGN_OR_RETURN(call.who, ctx.authn.Authenticate(call.req));
      }
      if (level == kPerson || call.who.is_operator) return {};
      if (level == kProvenPerson) {
        if (call.who.email_proven) return {};
        return core::Fail(core::ErrorCode::kPermissionDenied, "email_unverified",
                          "Confirm your email address first: open the link mailed to you at "
                          "sign-up. For a new link, sign up again with the same address, or use "
                          "'forgot password'.");
      }
      return core::Fail(core::ErrorCode::kPermissionDenied, "forbidden",
                        "Only operators may do this.");
    }
  }
  return core::Internal("unknown access level");
}

/// Whether `address` (as Request::peer_address has it) is a loopback address, IPv4-mapped
/// IPv6 included.
bool IsLoopback(const std::string& address) {
  boost::system::error_code ec;
  const boost::asio::ip::address ip = boost::asio::ip::make_address(address, ec);
  if (ec) return false;
  if (ip.is_v6() && ip.to_v6().is_v4_mapped()) {
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, ip.to_v6()).is_loopback();
  }
  return ip.is_loopback();
}

/// Whether a header field by this name says that a proxy stands between the TCP peer and the
/// client: RFC 7239 `Forwarded`, RFC 9110 `Via`, every `X-Forwarded-…`, and the fields proxies and
/// CDNs use to name the client instead (nginx's `X-Real-IP`, `X-Client-IP`, `Client-IP`,
/// `True-Client-IP`, `CF-Connecting-IP`, `Fastly-Client-IP`, `X-Cluster-Client-IP`,
/// `X-Original-Forwarded-For`).
bool IsForwardingField(std::string_view name) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "Forwarded",           "Via",
      "X-Real-IP",           "X-Client-IP",
      "Client-IP",           "True-Client-IP",
      "CF-Connecting-IP",    "Fastly-Client-IP",
      "X-Cluster-Client-IP", "X-Original-Forwarded-For"};
  constexpr std::string_view kForwardedPrefix = "X-Forwarded-";
  if (name.size() >= kForwardedPrefix.size() &&
      EqualsIgnoreCase(name.substr(0, kForwardedPrefix.size()), kForwardedPrefix)) {
    return true;
  }
  return std::any_of(kNames.begin(), kNames.end(),
                     [&](std::string_view known) { return EqualsIgnoreCase(name, known); });
}

}  // namespace

bool IsStraightFromThisMachine(const Request& req) {
  // Any such field, even an empty one, says a proxy may stand between: its client is elsewhere.
  const bool forwarded = std::any_of(req.headers.begin(), req.headers.end(),
                                     [](const auto& h) { return IsForwardingField(h.first); });
  // The TCP peer decides, and the client address too must be this machine's: a trusted proxy
  // naming an outside client never makes the request local.
  return !forwarded && IsLoopback(req.peer_address) && IsLoopback(req.remote_address);
}

core::Result<void> AdmitMetricsReader(ApiContext& ctx, Request& req) {
  if (IsStraightFromThisMachine(req)) return {};
  Call call{.req = req, .who = {}, .host = {}};
  return Admit(ctx, kOperator, call);
}

bool TakesNoBody(const ApiRoute& route) {
  return route.body == Body::kNone || route.method == "GET" || route.method == "HEAD" ||
         route.method == "DELETE";
}

std::span<const ApiRoute> ApiRoutes() { return kRoutes; }

void RegisterApiRoutes(Router& router, ApiContext& ctx) {
  for (const ApiRoute& route : kRoutes) {
    router.Add(std::string(route.method), std::string(route.pattern), [&ctx, &route](Request& req) {
      if (TakesNoBody(route)) {
        if (auto none = RefuseBody(req); !none) return ErrorResponse(none.error());
      }
      Call call{.req = req, .who = {}, .host = {}};
      if (route.tx == Tx::kOneRead) {
        core::Result<Response> answer =
            ctx.db.Read([&](store::Transaction& tx) -> core::Result<Response> {
              call.tx = &tx;
              GPUWERK_TRY(Admit(ctx, route.access, call));
              return route.handler(ctx, call);
            });
        call.tx = nullptr;
        if (!call.who.person_id.empty()) ctx.authn.RecordUse(call.who);
        return answer ? std::move(*answer) : ErrorResponse(answer.error());
      }
      if (auto admitted = Admit(ctx, route.access, call); !admitted) {
        return ErrorResponse(admitted.error());
      }
      core::Result<Response> answer = route.handler(ctx, call);
      return answer ? std::move(*answer) : ErrorResponse(answer.error());
    });
  }
}

}  // namespace gpuwerk::api
