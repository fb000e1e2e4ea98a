#pragma once

#include <CLI/CLI.hpp>
#include <string_view>

#include "agent/instance_runtime.h"

namespace gpuwerk::app {

/// Registers `gpuwerk agent` on `app` with the options of AgentOptions() (each a flag, a
/// `GPUWERK_<KEY>` variable and a key of `--config FILE` or GPUWERK_AGENT_CONFIG; precedence
/// flags > environment > file > default). `--relay-from` restricts every relay key line with
/// sshd's `from="PATTERNS"` (agent::RestrictRelayKeyLine). When parsed, the command runs the host
/// agent (agent::Agent) until SIGINT or SIGTERM and stores its exit status in `exit_code` (0 after
/// a clean stop, 2 for bad options, e.g. a missing --server or invalid --relay-from patterns,
/// with a one-line reason on stderr). A missing or wedged engine is reported to the server and
/// retried; it never ends the agent.
void AddAgentCommand(CLI::App& app, int& exit_code);

/// Logs at an agent's start (`component`: "agent" or "up") the Docker inside mode and the runtime
/// settings of `runtime`: privileged as a warning that a person in an instance is root on the
/// host, sysbox on a host with a GPU (`host_has_gpu`) as a warning that Sysbox passes no GPU
/// through.
void LogDockerInside(std::string_view component, const agent::InstanceRuntime& runtime,
                     bool host_has_gpu);

}  // namespace gpuwerk::app
