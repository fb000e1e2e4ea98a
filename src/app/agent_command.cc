#include "app/agent_command.h"

#include <fmt/ranges.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_client.h"
#include "agent/authorized_keys.h"
#include "agent/cluster_files.h"
#include "agent/docker_engine.h"
#include "agent/instance_limits.h"
#include "agent/inventory.h"
#include "agent/network_isolation.h"
#include "app/agent_config.h"
#include "app/command_config.h"
#include "core/logging.h"
#include "protocol/api_client.h"

namespace gpuwerk::app {
namespace {

int RunAgent(const AgentConfig& f) {
  if (auto url = protocol::CheckCredentialUrl(f.server_url); !url) {
    std::fprintf(stderr, "gpuwerk agent: --server: %s\n", url.error().message.c_str());
    return 2;
  }
  constexpr std::string_view kUnix = "unix://";
  if (!f.engine.starts_with(kUnix) || f.engine.size() <= kUnix.size()) {
    std::fprintf(stderr, "gpuwerk agent: --engine must be unix:///PATH, got '%s'\n",
                 f.engine.c_str());
    return 2;
  }
  if (f.sync_interval_seconds <= 0) {
    std::fprintf(stderr, "gpuwerk agent: --sync-interval-seconds must be positive\n");
    return 2;
  }
  if (!f.relay_from.empty()) {
    if (auto valid = agent::ValidateFromPatterns(f.relay_from); !valid) {
      std::fprintf(stderr, "gpuwerk agent: --relay-from: %s\n", valid.error().message.c_str());
      return 2;
    }
    if (f.relay_keys.empty() && f.relay_cas.empty()) {
      std::fprintf(stderr, "gpuwerk agent: --relay-from needs --relay-ca (or --relay-key)\n");
      return 2;
    }
  }
  // The relay CAs (docs/ssh.md "Upstream: the relay credential"), written per container for its
  // instance's principal, and the probe certificate the relay check offers.
  std::vector<std::string> relay_cas;
  for (const std::string& line : f.relay_cas) {
    auto ca = agent::ParseRelayCaLine(line);
    if (!ca) {
      std::fprintf(stderr, "gpuwerk agent: --relay-ca: %s\n", ca.error().message.c_str());
      return 2;
    }
    relay_cas.push_back(std::move(*ca));
  }
  std::string relay_probe;
  if (!f.relay_ca_probe.empty()) {
    if (relay_cas.empty()) {
      std::fprintf(stderr, "gpuwerk agent: --relay-ca-probe needs --relay-ca\n");
      return 2;
    }
    auto probe = agent::ParseRelayProbeCertificate(f.relay_ca_probe);
    if (!probe) {
      std::fprintf(stderr, "gpuwerk agent: --relay-ca-probe: %s\n", probe.error().message.c_str());
      return 2;
    }
    relay_probe = std::move(*probe);
  }
  // The relay's lines, restricted to the relay's addresses when --relay-from is given.
  std::vector<std::string> relay_lines;
  for (const std::string& key : f.relay_keys) {
    auto line = agent::RestrictRelayKeyLine(key, f.relay_from);
    if (!line) {
      std::fprintf(stderr, "gpuwerk agent: --relay-key: %s\n", line.error().message.c_str());
      return 2;
    }
    relay_lines.push_back(std::move(*line));
  }
  core::InitLogging(f.log_level);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  agent::DockerEngine engine({.socket_path = f.engine.substr(kUnix.size())});
  agent::AgentClient client(f.server_url, f.host_token);
  agent::AgentOptions options;
  options.ssh_bind_address = f.ssh_bind;
  options.state_dir = f.state_dir;
  // The login proof runs in a confined child of this binary (issue 12 finding 9).
  options.login_probe.command = agent::SelfLoginProbeCommand();
  options.sync_interval = std::chrono::seconds(f.sync_interval_seconds);
  options.relay_authorized_keys = relay_lines;
  options.relay_certificate_authorities = relay_cas;
  options.relay_ca_from = f.relay_from;
  options.relay_probe_certificate = relay_probe;
  if (!relay_lines.empty()) {
    spdlog::warn(
        "agent: --relay-key installs a plain relay key that opens every instance holding it; "
        "use --relay-ca with relays that have a CA (docs/ssh.md)");
  }
  agent::Inventory inventory = agent::DiscoverInventory();
  auto limits =
      agent::ResolveInstanceLimits({.memory_bytes = f.instance_memory_bytes,
                                    .memory_reserve_bytes = f.instance_memory_reserve_bytes,
                                    .cpus = f.instance_cpus,
                                    .cpus_reserved = f.instance_cpus_reserved,
                                    .pids_limit = f.instance_pids_limit,
                                    .extra_capabilities = f.instance_add_capabilities},
                                   inventory.memory_bytes, inventory.cpus);
  if (!limits) {
    std::fprintf(stderr, "gpuwerk agent: %s\n", limits.error().message.c_str());
    return 2;
  }
  options.instance_limits = std::move(*limits);
  auto runtime =
      agent::ResolveInstanceRuntime(f.docker_inside, f.instance_shm_bytes, inventory.memory_bytes,
                                    agent::ProcessCanRaiseLimits());
  if (!runtime) {
    std::fprintf(stderr, "gpuwerk agent: %s\n", runtime.error().message.c_str());
    return 2;
  }
  options.instance_runtime = *runtime;
  if (!runtime->memlock_unlimited) {
    options.instance_limits.not_enforced.emplace_back(agent::kMemlockNotRaised);
  }
  auto isolation = agent::ParseNetworkIsolation(f.instance_network_isolation,
                                                f.instance_network_deny, f.instance_network_allow);
  if (!isolation) {
    std::fprintf(stderr, "gpuwerk agent: %s\n", isolation.error().message.c_str());
    return 2;
  }
  options.instance_networks = isolation->enabled;
  options.rail = {.network = f.rail_network,
                  .interface = f.rail_interface,
                  .rdma_devices = f.rail_rdma_devices};
  if (auto rail = agent::CheckRailOptions(options.rail); !rail) {
    std::fprintf(stderr, "gpuwerk agent: %s\n", rail.error().message.c_str());
    return 2;
  }
  if (options.rail.network.empty()) {
    spdlog::warn(
        "agent: no --rail-network: the nodes of a 2-host instance on this host get their "
        "cluster files but no rail (docs/clusters.md)");
  }
  std::vector<agent::IsolationRepair> repairs;
  if (std::string gap = agent::PrepareNetworkIsolation(*isolation, &repairs); !gap.empty()) {
    spdlog::error("agent: {}", gap);
    options.instance_limits.not_enforced.push_back(std::move(gap));
  } else {
    agent::LogIsolationRepairs("agent", repairs, true);
    spdlog::info("agent: instance networks isolated; denied {}; allowed {}",
                 fmt::join(isolation->deny, ","), fmt::join(isolation->allow, ","));
    // Kept first in their hooks while the agent runs (docs/isolation.md).
    options.keep_network_isolation = [settings = *isolation] {
      return agent::KeepNetworkIsolation(settings);
    };
  }
  spdlog::info("agent: {} GPU(s), nvml {}, {} CPUs; server {}, engine {}", inventory.gpus.size(),
               inventory.nvml, inventory.cpus, f.server_url, f.engine);
  spdlog::info("agent: instance limits: memory {} bytes, {} CPUs, {} pids, capabilities {}",
               options.instance_limits.memory_bytes,
               static_cast<double>(options.instance_limits.nano_cpus) / 1e9,
               options.instance_limits.pids_limit,
               fmt::join(options.instance_limits.capabilities, ","));
  LogDockerInside("agent", options.instance_runtime, !inventory.gpus.empty());
  agent::Agent agent(options, engine, client, std::move(inventory));
  std::thread runner([&agent] { agent.Run(); });
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("agent: signal {} received, stopping", sig);
  agent.Stop();
  runner.join();
  spdlog::info("agent: stopped");
  return 0;
}

}  // namespace

void LogDockerInside(std::string_view component, const agent::InstanceRuntime& runtime,
                     bool host_has_gpu) {
  spdlog::info("{}: instances get /dev/shm of {} bytes and memlock {}; docker inside: {}",
               component, runtime.shm_bytes,
               runtime.memlock_unlimited ? "unlimited" : "at the engine's default",
               agent::DockerInsideName(runtime.docker_inside));
  if (!runtime.memlock_unlimited) {
    spdlog::warn(
        "{}: memlock is not raised to unlimited: this process lacks CAP_SYS_RESOURCE, and so does "
        "an engine started like it (docs/docker-inside.md \"Runtime settings\")",
        component);
  }
  if (runtime.docker_inside == agent::DockerInside::kPrivileged) {
    spdlog::warn(
        "{}: docker inside: privileged: instance containers are privileged, a person in one is "
        "root on this host; give the host to one tenant at a time (docs/docker-inside.md)",
        component);
  }
  if (runtime.docker_inside == agent::DockerInside::kSysbox && host_has_gpu) {
    spdlog::warn(
        "{}: docker inside: sysbox: instances run under {} instead of the nvidia runtime, and "
        "Sysbox passes no GPU through (docs/docker-inside.md)",
        component, agent::kSysboxRuntime);
  }
}

void AddAgentCommand(CLI::App& app, int& exit_code) {
  AddConfiguredCommand<AgentConfig>(app, "agent", "Run the host agent (one per GPU host)",
                                    AgentOptions(), "GPUWERK_AGENT_CONFIG", RunAgent, exit_code);
}

}  // namespace gpuwerk::app
