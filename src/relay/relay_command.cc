#include "relay/relay_command.h"

#include <signal.h>
#include <spdlog/spdlog.h>

namespace gpuwerk::relay {

int RunRelayUntilSignal(const RelayOptions& options, RelayAuthorizer& authorizer,
                        RelaySessionLog& log, const std::function<void(Relay&)>& started,
                        const std::function<void()>& stopping) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto relay = Relay::Start(options, authorizer, log);
  if (!relay) {
    spdlog::error("relay: cannot start: {}", relay.error().message);
    return 1;
  }
  spdlog::info("relay: install this line in each instance's authorized_keys (the agent does): {}",
               (*relay)->relay_key_public_line());
  if (started) started(**relay);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("relay: stopping (signal {})", sig);
  if (stopping) stopping();
  (*relay)->Stop();
  return 0;
}

}  // namespace gpuwerk::relay
