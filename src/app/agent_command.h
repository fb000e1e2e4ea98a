#pragma once

#include <CLI/CLI.hpp>

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

}  // namespace gpuwerk::app
