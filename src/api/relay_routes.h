#pragma once

#include "api/api_context.h"
#include "relay/relay_authorizer.h"

namespace gpuwerk::api {

/// `POST /api/v1/relay/authorize` (docs/ssh.md): a remote `gpuwerk relay` asks whether a login
/// may pass and where it goes. Authenticated as an operator (the relay runs with an operator's
/// API token; a person's token gets 403 `forbidden`). Body: {user, key_type, public_key,
/// fingerprint, source_address}, each a string; answer 200 {"decision":"allow","target":…} or
/// {"decision":"refuse","code","message"} from `authorizer` (the store-backed one, so a remote
/// relay decides exactly as `gpuwerk up`'s in-process one). Errors: 400 `invalid_field`, 503
/// when the store fails. `authorizer` must outlive the router.
void RegisterRelayRoutes(Router& router, ApiContext& ctx, relay::RelayAuthorizer& authorizer);

}  // namespace gpuwerk::api
