#pragma once

#include "app/options.h"

namespace gpuwerk::app {

/// Options that several commands declare alike; `Config` needs the named field.

/// `log_level` (`--log-level`, GPUWERK_LOG_LEVEL).
template <class Config>
Option<Config> LogLevelOption() {
  return {
      .key = "log_level", .field = &Config::log_level, .help = "trace, debug, info, warn or error"};
}

/// `server_url` (`--server`, GPUWERK_SERVER_URL): the control plane the agent or relay talks to.
template <class Config>
Option<Config> ServerUrlOption() {
  return {.key = "server_url",
          .field = &Config::server_url,
          .help =
              "the control plane's URL: https://, or http:// to this machine's loopback only "
              "(the token must not cross a network in clear text)",
          .flag = "--server",
          .required = true};
}

}  // namespace gpuwerk::app
