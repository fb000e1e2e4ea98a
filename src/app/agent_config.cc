#include "app/agent_config.h"

#include "app/common_options.h"

namespace gpuwerk::app {

const std::vector<Option<AgentConfig>>& AgentOptions() {
  using C = AgentConfig;
  static const std::vector<Option<C>> kOptions = {
      ServerUrlOption<C>(),
      {.key = "host_token",
       .field = &C::host_token,
       .help = "this host's token (gwh_…, from `gpuwerk admin hosts add`)",
       .flag = "--token",
       .required = true},
      {.key = "engine",
       .field = &C::engine,
       .help = "the container engine, a Docker Engine API socket unix:///PATH",
       .required = true},
      {.key = "ssh_bind",
       .field = &C::ssh_bind,
       .help = "the host's internal address the instances' sshd ports are published on; never a "
               "wildcard"},
      {.key = "state_dir", .field = &C::state_dir, .help = "where the agent keeps its state"},
      {.key = "sync_interval_seconds",
       .field = &C::sync_interval_seconds,
       .help = "seconds between rounds until the server says otherwise"},
      LogLevelOption<C>(),
      {.key = "relay_keys",
       .field = &C::relay_keys,
       .help = "an SSH relay's public key line (printed by `gpuwerk relay` at start), added to "
               "every instance's authorized_keys; repeat the flag for several relays",
       .flag = "--relay-key",
       .details = "In the environment one line per key; in the file a string or an array of "
                  "strings."},
      {.key = "relay_from",
       .field = &C::relay_from,
       .help = "restrict every relay key line to these source addresses: sshd from= patterns, "
               "comma-separated (e.g. 10.0.0.2,10.0.1.0/24), no quotes or blanks",
       .details = "Set it to the relays' addresses as the instances' sshd sees them "
                  "(docs/agent-protocol.md)."},
  };
  return kOptions;
}

}  // namespace gpuwerk::app
