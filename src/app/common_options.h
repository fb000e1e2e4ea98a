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

/// `relay_trusted_proxies` (`--relay-trusted-proxies`, repeatable): the TCP balancers whose HAProxy
/// PROXY protocol header (v1 or v2, haproxy.org proxy-protocol.txt) the relay believes.
template <class Config>
Option<Config> RelayTrustedProxiesOption() {
  return {.key = "relay_trusted_proxies",
          .field = &Config::relay_trusted_proxies,
          .help =
              "a TCP balancer (an IPv4/IPv6 CIDR or address, e.g. 10.0.0.0/8) in front of the "
              "relay that sends the PROXY protocol header (v1 or v2); repeat the flag for "
              "several. Connections from it must start with one, and the client address it "
              "names is used for everything; nobody else's header is believed",
          .details =
              "Per-source limits and penalties, the pre-authentication flood rules, relay "
              "session source addresses and log lines then use the client address the "
              "header names; a LOCAL or UNKNOWN header (the balancer's health check) "
              "counts as the balancer. A connection from a listed address without a "
              "whole, valid header within 3 s is closed (docs/ssh.md \"Behind a TCP "
              "balancer\")."};
}

}  // namespace gpuwerk::app
