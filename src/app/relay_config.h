#pragma once

#include <string>
#include <vector>

#include "app/options.h"

namespace gpuwerk::app {

/// Everything `gpuwerk relay` can be told: the type and default of each option, declared in
/// RelayOptions() (flag, `GPUWERK_<KEY>`, TOML key of `--config FILE`; docs/configuration.md).
struct RelayConfig {
  std::string server_url;
  std::string relay_token;  ///< the relay's credential, "gwr_…" (gpuwerk admin relays add NAME)
  std::string ssh_listen = "0.0.0.0:2222";
  std::string host_key = "/var/lib/gpuwerk/relay/host_key";
  std::string relay_key = "/var/lib/gpuwerk/relay/relay_key";
  std::string relay_ca = "/var/lib/gpuwerk/relay/relay_ca";
  std::string log_level = "info";
  /// The backstop re-check of every open relay session, in seconds (RelayOptions).
  int recheck_interval_seconds = 15;
  /// Failed re-checks in a row after which every relay session ends (RelayOptions).
  int max_failed_rechecks = 3;
  /// The TCP balancers whose PROXY protocol header the relay believes (CIDRs or addresses;
  /// relay::RelayOptions::trusted_proxies). Empty: none.
  std::vector<std::string> relay_trusted_proxies;
};

/// The options of `gpuwerk relay`, one declaration each (app/options.h).
const std::vector<Option<RelayConfig>>& RelayOptions();

}  // namespace gpuwerk::app
