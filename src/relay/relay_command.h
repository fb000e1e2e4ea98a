#pragma once

#include <functional>

#include "relay/relay.h"

namespace gpuwerk::relay {

/// Runs a Relay until SIGINT or SIGTERM, then stops it (open relay sessions end with "relay
/// stopping"). For `gpuwerk relay`: `app` parses flags into `options` and builds the authorizer
/// and the session log, then calls this from the main thread before starting other threads (it
/// blocks SIGINT and SIGTERM in the calling thread, which new threads inherit, and waits for
/// them with sigwait). Prints the relay key's public line and the host key's fingerprint to the
/// log at start. Returns the process exit status: 0 after a clean stop, 1 when the relay cannot
/// start (the reason is logged).
///
/// `started` (optional) runs once the relay listens, `stopping` before it stops (e.g. to start
/// and stop an HttpRelayWatch on it).
int RunRelayUntilSignal(const RelayOptions& options, RelayAuthorizer& authorizer,
                        RelaySessionLog& log, const std::function<void(Relay&)>& started = {},
                        const std::function<void()>& stopping = {});

}  // namespace gpuwerk::relay
