#pragma once

#include <span>
#include <string_view>

#include "access/relay_credential_table.h"
#include "api/api_context.h"
#include "api/http_types.h"
#include "auth/principal.h"
#include "core/error.h"
#include "sched/host_registry.h"
#include "store/database.h"

namespace gpuwerk::api {

class Router;

/// Who may call a route. The route table checks it before the handler runs, so a handler only
/// sees callers its route admits.
enum class Access {
  /// Anyone; no credentials are read (handlers that change state check Origin themselves).
  kPublic,
  /// A signed-in person: a sign-in session cookie (Origin checked on unsafe methods, R-2) or an
  /// API token (`Authorization: Bearer gwt_…`). Errors: 401 unauthenticated, 403
  /// origin_mismatch.
  kPerson,
  /// As kPerson, and the person's address is proven (docs/accounts.md "Address proof"): for
  /// what costs or grants access (launching, joining a queue, API tokens, SSH keys) and for a
  /// password change (it voids the mailbox owner's links and mails them). Errors: as kPerson;
  /// 403 email_unverified for an unproven account.
  kProvenPerson,
  /// A person who is an operator. Errors: as kPerson; 403 forbidden for anyone else.
  kOperator,
  /// A host agent, by its host token (`Authorization: Bearer gwh_…`). Errors: 401.
  kAgent,
  /// A `gpuwerk relay`, by its relay credential (`Authorization: Bearer gwr_…`, registered with
  /// `gpuwerk admin relays add NAME`; access::RelayCredentials). Nothing else is accepted, an
  /// operator's API token included. Errors: 401 unauthenticated (no credential, or an unknown or
  /// revoked relay credential); 403 relay_credential_required (another kind of credential).
  /// A relay credential is refused on every route of any other level (403
  /// relay_credential_not_allowed), kPublic ones included.
  kRelay,
};

/// How a route's call reaches the store.
enum class Tx {
  /// The handler's services open the transactions they need.
  kOwn,
  /// One read transaction for the whole call (hot read-only routes: one pool checkout and one
  /// BEGIN/COMMIT instead of one for the credentials and one for the answer). The route table
  /// opens it, authenticates in it and hands it to the handler as Call::tx. The handler only
  /// reads, and has no effect outside the transaction: it runs again when the store is busy.
  kOneRead,
};

/// Whether a route reads a request body.
enum class Body {
  /// POST and PUT read one (JSON, or a form on the link pages); GET, HEAD and DELETE take none.
  kByMethod,
  /// None, whatever the method: a POST that only acts (logout, restart, drain, undrain).
  kNone,
};

/// One call of a handler: the request and who the route table authenticated it as.
struct Call {
  Request& req;
  /// The caller of kPerson, kProvenPerson and kOperator routes; empty for the others.
  auth::Principal who;
  /// The calling relay of kRelay routes (its name is the `relay` its reports are filed under);
  /// empty for the others.
  access::RelayCredential relay;
  /// The calling host of kAgent routes; empty for the others.
  sched::Host host;
  /// The call's read transaction on Tx::kOneRead routes; null on the others.
  store::Transaction* tx = nullptr;
};

/// A handler answers a call or returns the error that the route table answers as problem JSON
/// (HttpStatusFor maps its code to the status; ErrorResponse adds Retry-After). Runs on an HTTP
/// server thread and may block briefly (store, password hashing).
using ApiHandler = core::Result<Response> (*)(ApiContext& ctx, Call& call);

/// One route: `method` and `pattern` as Router::Add takes them, who may call it, its handler.
struct ApiRoute {
  std::string_view method;
  std::string_view pattern;
  Access access;
  ApiHandler handler;
  Tx tx = Tx::kOwn;
  Body body = Body::kByMethod;
};

/// Whether `route` takes no request body: Body::kNone, or a GET, HEAD or DELETE. The route table
/// answers such a route's request with a body (other than `{}`) 400 before it authenticates or
/// runs anything (RefuseBody).
bool TakesNoBody(const ApiRoute& route);

/// Every route the server answers besides `/healthz` and `/metrics` (AddOperationalRoutes): the
/// /api/v1 resources, the agent and relay endpoints, the link pages and the home page. One table
/// in api_routes.cc, so a reader sees every route and who may call it in one place.
std::span<const ApiRoute> ApiRoutes();

/// Whether `req` came straight from this machine: its TCP peer (Request::peer_address: a trusted
/// proxy's header never makes a request local) and its client address (remote_address) are
/// loopback addresses, IPv4-mapped included, and it has no field, even an empty one, that a proxy
/// adds to name its client: `Forwarded`, `Via`, any `X-Forwarded-…`, `X-Real-IP`,
/// `X-Client-IP`, `Client-IP`, `True-Client-IP`, `CF-Connecting-IP`, `Fastly-Client-IP`,
/// `X-Cluster-Client-IP`, `X-Original-Forwarded-For` (a proxy on this machine does not make its
/// clients local; docs/configuration.md "Behind a reverse proxy").
bool IsStraightFromThisMachine(const Request& req);

/// Whether `req` may read `/metrics` (AddOperationalRoutes), which shows request counts per route
/// and mail counters: a request IsStraightFromThisMachine, or an operator's (as kOperator).
/// Errors: as kOperator.
core::Result<void> AdmitMetricsReader(ApiContext& ctx, Request& req);

/// Registers every route of ApiRoutes() on `router`. Each request is authenticated for its
/// route's Access, then its handler runs; an error from either becomes problem JSON here and
/// nowhere else. `ctx` must outlive the router.
void RegisterApiRoutes(Router& router, ApiContext& ctx);

}  // namespace gpuwerk::api
