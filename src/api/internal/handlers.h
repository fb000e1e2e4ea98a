#pragma once

// The handlers of the route table (api_routes.cc), one group per *_handlers.cc file. Each answers
// one route; the table says which and who may call it.

#include <string_view>

#include "api/api_context.h"
#include "api/api_routes.h"
#include "api/http_types.h"
#include "core/error.h"

namespace gpuwerk::api {

/// A server-rendered page of a mailed link (auth_pages.cc): `title` is escaped here, `html_body`
/// is HTML the caller built (escaping its outside text); no-store, a CSP without scripts.
Response LinkPageHtml(int status, std::string_view title, std::string_view html_body);

}  // namespace gpuwerk::api

namespace gpuwerk::api::handlers {

using Answer = core::Result<Response>;

// account_handlers.cc: /api/v1/auth/*, /api/v1/me.
Answer SignUp(ApiContext& ctx, Call& call);
Answer ConsumeAddressProof(ApiContext& ctx, Call& call);
Answer LogIn(ApiContext& ctx, Call& call);
Answer LogOut(ApiContext& ctx, Call& call);
Answer RequestMagicLink(ApiContext& ctx, Call& call);
Answer ConsumeMagicLink(ApiContext& ctx, Call& call);
Answer RequestPasswordReset(ApiContext& ctx, Call& call);
Answer ConsumePasswordReset(ApiContext& ctx, Call& call);
Answer GetMe(ApiContext& ctx, Call& call);
Answer ChangePassword(ApiContext& ctx, Call& call);
Answer AdminInvite(ApiContext& ctx, Call& call);

// auth_pages.cc: the pages mailed links open (/auth/…).
Answer MagicLinkPage(ApiContext& ctx, Call& call);
Answer MagicLinkForm(ApiContext& ctx, Call& call);
Answer ResetPasswordPage(ApiContext& ctx, Call& call);
Answer ResetPasswordForm(ApiContext& ctx, Call& call);
Answer AddressProofPage(ApiContext& ctx, Call& call);
Answer AddressProofForm(ApiContext& ctx, Call& call);

// token_handlers.cc: /api/v1/tokens.
Answer ListTokens(ApiContext& ctx, Call& call);
Answer CreateToken(ApiContext& ctx, Call& call);
Answer DeleteToken(ApiContext& ctx, Call& call);

// ssh_key_handlers.cc: /api/v1/ssh-keys, /api/v1/admin/ssh-keys/release.
Answer ListSshKeys(ApiContext& ctx, Call& call);
Answer AddSshKey(ApiContext& ctx, Call& call);
Answer SshKeyClaimChallenge(ApiContext& ctx, Call& call);
Answer ClaimSshKey(ApiContext& ctx, Call& call);
Answer DeleteSshKey(ApiContext& ctx, Call& call);
Answer AdminReleaseSshKey(ApiContext& ctx, Call& call);

// instance_handlers.cc: /api/v1/instances, /api/v1/gpu-types, /api/v1/admin/gpu-types.
Answer ListInstances(ApiContext& ctx, Call& call);
Answer CreateInstance(ApiContext& ctx, Call& call);
Answer GetInstance(ApiContext& ctx, Call& call);
Answer RestartInstance(ApiContext& ctx, Call& call);
Answer DeleteInstance(ApiContext& ctx, Call& call);
Answer ListGpuTypes(ApiContext& ctx, Call& call);
Answer AdminListGpuTypes(ApiContext& ctx, Call& call);
Answer AdminPutGpuType(ApiContext& ctx, Call& call);

// queue_handlers.cc: /api/v1/queue-entries, /api/v1/usage/queue.
Answer ListQueueEntries(ApiContext& ctx, Call& call);
Answer JoinQueue(ApiContext& ctx, Call& call);
Answer LeaveQueue(ApiContext& ctx, Call& call);
Answer QueueHistory(ApiContext& ctx, Call& call);

// admin_view_handlers.cc: the operator's views of everyone (people, instances, queues).
Answer AdminListInstances(ApiContext& ctx, Call& call);
Answer AdminListQueue(ApiContext& ctx, Call& call);
Answer AdminListPeople(ApiContext& ctx, Call& call);
Answer AdminSetOperator(ApiContext& ctx, Call& call);
Answer AdminClearOperator(ApiContext& ctx, Call& call);
Answer AdminSignUpPolicy(ApiContext& ctx, Call& call);

// host_handlers.cc: /api/v1/admin/hosts, /api/v1/admin/host-pairs, /api/v1/agent/*.
Answer AddHost(ApiContext& ctx, Call& call);
Answer ListHosts(ApiContext& ctx, Call& call);
Answer SetHostSsh(ApiContext& ctx, Call& call);
Answer DrainHost(ApiContext& ctx, Call& call);
Answer UndrainHost(ApiContext& ctx, Call& call);
Answer RemoveHost(ApiContext& ctx, Call& call);
Answer LinkHostPair(ApiContext& ctx, Call& call);
Answer ListHostPairs(ApiContext& ctx, Call& call);
Answer UnlinkHostPair(ApiContext& ctx, Call& call);
Answer AgentSync(ApiContext& ctx, Call& call);
Answer AgentWatch(ApiContext& ctx, Call& call);

// event_handlers.cc: GET /api/v1/events.
Answer OpenEventStream(ApiContext& ctx, Call& call);

// relay_handlers.cc: what relays ask and report (docs/ssh.md).
Answer AuthorizeRelayLogin(ApiContext& ctx, Call& call);
Answer ReportRelaySession(ApiContext& ctx, Call& call);
Answer RelayRestarted(ApiContext& ctx, Call& call);
Answer ReportRelayRefusals(ApiContext& ctx, Call& call);
Answer RecheckRelaySessions(ApiContext& ctx, Call& call);
Answer WatchRelayAccess(ApiContext& ctx, Call& call);

// relay_credential_handlers.cc: /api/v1/admin/relays, the relays' credentials.
Answer AdminAddRelay(ApiContext& ctx, Call& call);
Answer AdminListRelays(ApiContext& ctx, Call& call);
Answer AdminRevokeRelay(ApiContext& ctx, Call& call);

// relay_session_handlers.cc: relay session lists.
Answer ListInstanceRelaySessions(ApiContext& ctx, Call& call);
Answer AdminListRelaySessions(ApiContext& ctx, Call& call);

// Billing: payment methods and the operator's manual cards (billing_handlers.cc).
Answer GetBilling(ApiContext& ctx, Call& call);
Answer BeginCardSetup(ApiContext& ctx, Call& call);
Answer RemovePaymentMethod(ApiContext& ctx, Call& call);
Answer RemoveOwnPaymentMethod(ApiContext& ctx, Call& call);
Answer AdminSetCard(ApiContext& ctx, Call& call);
Answer AdminClearCard(ApiContext& ctx, Call& call);
Answer AdminSetTeamCard(ApiContext& ctx, Call& call);
Answer AdminClearTeamCard(ApiContext& ctx, Call& call);
/// POST /api/v1/billing/webhooks/stripe: the raw body and Stripe-Signature to
/// ApiContext::stripe_webhook (404 not_found when the provider is not stripe).
Answer StripeWebhook(ApiContext& ctx, Call& call);
// team_handlers.cc: /api/v1/team, the invitation link's page /team/accept.
Answer GetTeam(ApiContext& ctx, Call& call);
Answer GetTeamUsage(ApiContext& ctx, Call& call);
Answer CreateTeam(ApiContext& ctx, Call& call);
Answer InviteToTeam(ApiContext& ctx, Call& call);
Answer RevokeTeamInvite(ApiContext& ctx, Call& call);
Answer AcceptTeamInvite(ApiContext& ctx, Call& call);
Answer RemoveTeamMember(ApiContext& ctx, Call& call);
Answer LeaveTeam(ApiContext& ctx, Call& call);
Answer SetTeamRole(ApiContext& ctx, Call& call);
Answer PreviewTeamInvite(ApiContext& ctx, Call& call);

// audit_handlers.cc: /api/v1/admin/audit.
Answer AdminListAudit(ApiContext& ctx, Call& call);
// usage_handlers.cc: invoices and the usage history.
Answer ListInvoices(ApiContext& ctx, Call& call);
Answer UsageSessions(ApiContext& ctx, Call& call);
Answer UsageDaily(ApiContext& ctx, Call& call);
Answer AdminCloseInvoices(ApiContext& ctx, Call& call);
Answer AdminExportInvoices(ApiContext& ctx, Call& call);

}  // namespace gpuwerk::api::handlers
