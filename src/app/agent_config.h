#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/options.h"

namespace gpuwerk::app {

/// Everything `gpuwerk agent` can be told: the type and default of each option, declared in
/// AgentOptions() (flag, `GPUWERK_<KEY>`, TOML key of `--config FILE`; docs/configuration.md).
struct AgentConfig {
  std::string server_url;
  std::string host_token;  ///< gwh_…
  std::string engine;      ///< unix:///PATH
  std::string ssh_bind = "127.0.0.1";
  std::string state_dir = "/var/lib/gpuwerk/agent";
  int sync_interval_seconds = 2;
  std::string log_level = "info";
  std::vector<std::string> relay_cas;   ///< relay CA public lines ("ssh-ed25519 AAAA…")
  std::string relay_ca_probe;           ///< a probe certificate of one of them
  std::vector<std::string> relay_keys;  ///< plain relay key lines (relays before the CA)
  std::string relay_from;               ///< sshd from= patterns; empty: none
  // Per-instance limits (agent/instance_limits.h InstanceLimitSettings; docs/isolation.md).
  int64_t instance_memory_bytes = 0;                         ///< 0: automatic
  int64_t instance_memory_reserve_bytes = int64_t{4} << 30;  ///< left to the host
  std::string instance_cpus;                                 ///< decimal CPUs; "": automatic
  std::string instance_cpus_reserved = "1";                  ///< left to the host
  int instance_pids_limit = 4096;
  std::vector<std::string> instance_add_capabilities;  ///< e.g. NET_RAW
  // Instance networks (agent/network_isolation.h NetworkIsolationSettings; docs/isolation.md).
  std::string instance_network_isolation = "on";  ///< on | off
  std::vector<std::string> instance_network_deny{
      "10.0.0.0/8",     "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
      "169.254.0.0/16", "fc00::/7",      "fe80::/10"};  ///< CIDRs an instance may not reach
  std::vector<std::string> instance_network_allow;      ///< CIDRs it may reach all the same
  // The rail of 2-host instances (agent/cluster_files.h RailOptions; docs/clusters.md).
  std::string rail_network;             ///< the engine network on the fabric; "": none
  std::string rail_interface = "eth1";  ///< its interface name inside a container
  std::string rail_rdma_devices;        ///< NCCL_IB_HCA; "": TCP
  // Docker inside and runtime settings (agent/instance_runtime.h; docs/docker-inside.md).
  std::string docker_inside = "off";  ///< off | sysbox | privileged
  int64_t instance_shm_bytes = 0;     ///< /dev/shm, bytes; 0: automatic
};

/// The options of `gpuwerk agent`, one declaration each (app/options.h).
const std::vector<Option<AgentConfig>>& AgentOptions();

}  // namespace gpuwerk::app
