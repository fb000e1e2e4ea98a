#pragma once

#include "api/api_context.h"
#include "core/random.h"
#include "relay/relay_authorizer.h"
#include "store/database.h"

namespace gpuwerk::api {

/// The routes of the SSH relay (docs/ssh.md, docs/api.md "Relay sessions"):
///
/// For remote `gpuwerk relay`s, authenticated as an operator (the relay runs with an operator's
/// API token; a person's token gets 403 `forbidden`):
/// - `POST /api/v1/relay/authorize`: whether a login may pass and where it goes. Body: {user,
///   key_type, public_key, fingerprint, source_address}, each a string; answer 200
///   {"decision":"allow","target":…} or {"decision":"refuse","code","message"} from `authorizer`
///   (the store-backed one, so a remote relay decides exactly as `gpuwerk up`'s in-process one).
/// - `PUT /api/v1/relay/sessions/{id}`: a relay session's start (ended_at null) or end
///   (relay::RelaySessionReportJson), recorded idempotently (store::RecordRelaySessionStart /
///   End); 200 {id, recorded} where `recorded` says whether this report changed anything.
///   Errors: 400 `invalid_field`, `invalid_relay_session`; 409 `relay_session_conflict` (the id
///   belongs to another relay).
/// - `POST /api/v1/relay/restarted` {relay}: the relay started; its rows still open are closed
///   with "relay restarted" (store::CloseOpenRelaySessions); 200 {relay, closed}.
///
/// Lists (RegisterRelaySessionRoutes, relay_session_handlers.cc), 15 a page, newest first:
/// - `GET /api/v1/instances/{id}/relay-sessions?page=N`: the instance's owner (id, or live
///   name; a deleted instance's history stays listed by id); 404 `not_found` for anyone else.
/// - `GET /api/v1/admin/relay-sessions?page=N[&instance_id=…][&person_id=…]`: operators (403
///   `forbidden` otherwise); items also carry the person's `email`.
///
/// The relay name "local" belongs to `gpuwerk up`'s in-process relay and is refused from remote
/// relays (400 `invalid_field`). Errors everywhere: 503 when the store fails. `authorizer`, `db`
/// and `rng` must outlive the router.
void RegisterRelayRoutes(Router& router, ApiContext& ctx, relay::RelayAuthorizer& authorizer,
                         store::Database& db, core::Rng& rng);
/// The two list routes above (called by RegisterRelayRoutes).
void RegisterRelaySessionRoutes(Router& router, ApiContext& ctx, store::Database& db);

}  // namespace gpuwerk::api
