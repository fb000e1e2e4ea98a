#include "app/agent_command.h"

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
#include "agent/docker_engine.h"
#include "agent/inventory.h"
#include "core/logging.h"

namespace gpuwerk::app {
namespace {

struct AgentFlags {
  std::string server;
  std::string token;
  std::string engine;
  std::string ssh_bind = "127.0.0.1";
  std::string state_dir = "/var/lib/gpuwerk/agent";
  int sync_interval_seconds = 2;
  std::string log_level = "info";
  std::vector<std::string> relay_keys;
  std::string relay_from;
};

int RunAgent(const AgentFlags& f) {
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
    if (f.relay_keys.empty()) {
      std::fprintf(stderr, "gpuwerk agent: --relay-from needs --relay-key\n");
      return 2;
    }
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
  agent::AgentClient client(f.server, f.token);
  agent::AgentOptions options;
  options.ssh_bind_address = f.ssh_bind;
  options.state_dir = f.state_dir;
  options.sync_interval = std::chrono::seconds(f.sync_interval_seconds);
  options.relay_authorized_keys = relay_lines;
  agent::Inventory inventory = agent::DiscoverInventory();
  spdlog::info("agent: {} GPU(s), nvml {}, {} CPUs; server {}, engine {}", inventory.gpus.size(),
               inventory.nvml, inventory.cpus, f.server, f.engine);
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

void AddAgentCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<AgentFlags>();
  auto* cmd = app.add_subcommand("agent", "run the host agent (one per GPU host)");
  cmd->add_option("--server", flags->server, "the control plane's URL")
      ->envname("GPUWERK_SERVER_URL")
      ->required();
  cmd->add_option("--token", flags->token, "this host's token (gwh_…)")
      ->envname("GPUWERK_HOST_TOKEN")
      ->required();
  cmd->add_option("--engine", flags->engine, "the container engine, unix:///PATH")
      ->envname("GPUWERK_ENGINE")
      ->required();
  cmd->add_option("--ssh-bind", flags->ssh_bind, "host address sshd ports are published on")
      ->envname("GPUWERK_SSH_BIND");
  cmd->add_option("--state-dir", flags->state_dir, "where the agent keeps its state")
      ->envname("GPUWERK_STATE_DIR");
  cmd->add_option("--sync-interval-seconds", flags->sync_interval_seconds,
                  "seconds between rounds until the server says otherwise")
      ->envname("GPUWERK_SYNC_INTERVAL_SECONDS");
  cmd->add_option("--log-level", flags->log_level, "trace, debug, info, warn or error")
      ->envname("GPUWERK_LOG_LEVEL");
  cmd->add_option("--relay-key", flags->relay_keys,
                  "an SSH relay's public key line (printed by `gpuwerk relay` at start), added "
                  "to every instance's authorized_keys; repeat for several relays")
      ->envname("GPUWERK_RELAY_KEYS");
  cmd->add_option("--relay-from", flags->relay_from,
                  "restrict the relay key to these source addresses: sshd from= patterns, "
                  "comma-separated (e.g. 10.0.0.2,10.0.1.0/24); default: none")
      ->envname("GPUWERK_RELAY_FROM");
  cmd->callback([flags, &exit_code] { exit_code = RunAgent(*flags); });
}

}  // namespace gpuwerk::app
