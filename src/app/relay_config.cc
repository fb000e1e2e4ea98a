#include "app/relay_config.h"

#include "app/common_options.h"

namespace gpuwerk::app {

const std::vector<Option<RelayConfig>>& RelayOptions() {
  using C = RelayConfig;
  static const std::vector<Option<C>> kOptions = {
      ServerUrlOption<C>(),
      {.key = "relay_token",
       .field = &C::relay_token,
       .help = "the relay's credential (gwr_..., from 'gpuwerk admin relays add NAME'), which "
               "opens the relay's routes only and names the relay",
       .flag = "--token-file",
       .required = true,
       .secret = true},
      {.key = "ssh_listen",
       .field = &C::ssh_listen,
       .help = "the SSH address ADDR:PORT people connect to",
       .flag = "--listen"},
      {.key = "host_key",
       .field = &C::host_key,
       .help = "the relay's SSH host key file (created once, 0600)"},
      {.key = "relay_key",
       .field = &C::relay_key,
       .help = "the key file the relay logs in to instances with, always with a certificate for "
               "that instance alone (created once, 0600)"},
      {.key = "relay_ca",
       .field = &C::relay_ca,
       .help = "the relay CA's key file (created once, 0600), which signs the relay's "
               "short-lived certificate for each instance; agents get its public line with "
               "--relay-ca (printed at start); relays that share a CA share this file",
       .details = "docs/ssh.md \"Upstream: the relay credential\"."},
      LogLevelOption<C>(),
      {.key = "recheck_interval_seconds",
       .field = &C::recheck_interval_seconds,
       .help = "seconds between two backstop re-checks of every open relay session (one batched "
               "request; access changes are pushed at once besides, docs/ssh.md \"Revocation\")"},
      {.key = "max_failed_rechecks",
       .field = &C::max_failed_rechecks,
       .help = "failed re-checks in a row (no answer, 5xx) after which the relay ends every open "
               "relay session (fail closed); a refused relay credential ends them at the first"},
      RelayTrustedProxiesOption<C>(),
  };
  return kOptions;
}

}  // namespace gpuwerk::app
