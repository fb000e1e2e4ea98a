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
  // What every host agent needs (docs/ssh.md "Upstream: the relay credential"): the CA's public
  // line, which it writes per container for that instance's principal, and the probe
  // certificate it checks sshd with. Both are public.
  std::string ca = (*relay)->relay_ca_public_line();
  while (!ca.empty() && ca.back() == '\n') ca.pop_back();
  spdlog::info("relay: give every host agent: gpuwerk agent --relay-ca '{}' --relay-ca-probe '{}'",
               ca, (*relay)->relay_probe_certificate());
  if (started) started(**relay);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("relay: stopping (signal {})", sig);
  if (stopping) stopping();
  (*relay)->Stop();
  return 0;
}

}  // namespace gpuwerk::relay
