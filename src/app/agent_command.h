#pragma once

#include <CLI/CLI.hpp>

namespace gpuwerk::app {

/// Registers `gpuwerk agent --server URL --token TOKEN --engine unix:///PATH [--ssh-bind ADDR]
/// [--state-dir DIR] [--sync-interval-seconds N] [--relay-key LINE]… [--relay-from PATTERNS]
/// [--log-level L]` on `app`; each flag may also come from the environment (GPUWERK_SERVER_URL,
/// GPUWERK_HOST_TOKEN, GPUWERK_ENGINE, GPUWERK_SSH_BIND, GPUWERK_STATE_DIR,
/// GPUWERK_SYNC_INTERVAL_SECONDS, GPUWERK_RELAY_KEYS, GPUWERK_RELAY_FROM, GPUWERK_LOG_LEVEL; a flag
/// wins). `--relay-from` restricts every relay key line with sshd's `from="PATTERNS"`
/// (agent::RestrictRelayKeyLine; comma-separated address patterns, no quotes or blanks). When
/// parsed, the command runs the host agent (agent::Agent) until SIGINT or SIGTERM and stores its
/// exit status in `exit_code` (0 after a clean stop, 2 for bad flags, e.g. invalid --relay-from
/// patterns, with a one-line reason on stderr). A missing or wedged engine is reported to the
/// server and retried; it never ends the agent.
void AddAgentCommand(CLI::App& app, int& exit_code);

}  // namespace gpuwerk::app
