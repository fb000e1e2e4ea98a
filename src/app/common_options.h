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

/// `docker_inside` (`--docker-inside`, GPUWERK_DOCKER_INSIDE): off, sysbox or privileged
/// (agent::ParseDockerInside; docs/docker-inside.md).
template <class Config>
Option<Config> DockerInsideOption() {
  return {.key = "docker_inside",
          .field = &Config::docker_inside,
          .help =
              "Docker inside the instances: off (installed, its daemon cannot run), sysbox "
              "(instances run under the Sysbox runtime, which the operator installs: nested "
              "containers without host privileges) or privileged (root in an instance is root "
              "on this host: only for a host given to one tenant at a time)",
          .details =
              "What each mode lets a person reach, and what to do between tenants in "
              "privileged mode: docs/docker-inside.md. A privileged host says so in its "
              "inventory (the host listing)."};
}

/// `instance_shm_bytes` (`--instance-shm-bytes`, GPUWERK_INSTANCE_SHM_BYTES): each instance
/// container's /dev/shm size (agent::ResolveInstanceRuntime).
template <class Config>
Option<Config> InstanceShmOption() {
  return {.key = "instance_shm_bytes",
          .field = &Config::instance_shm_bytes,
          .help =
              "each instance container's /dev/shm size in bytes (at least 64 MiB); 0: 16 GiB, "
              "or half the host's memory where that is less. A ceiling for NCCL and data "
              "loaders, counted against the memory limit only when written",
          .shown_default = "0 (automatic)",
          .details =
              "Every instance also gets memlock unlimited, for its sessions through sshd "
              "too, where the host may raise limits (docs/docker-inside.md \"Runtime "
              "settings\")."};
}

}  // namespace gpuwerk::app
