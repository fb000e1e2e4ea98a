#pragma once

#include <CLI/CLI.hpp>

namespace gpuwerk::app {

/// Registers `gpuwerk relay --server URL --token TOKEN --listen ADDR:PORT [--host-key FILE]
/// [--relay-key FILE] [--name NAME] [--log-level L]` (DESIGN.md "Command line"; docs/ssh.md) on
/// `app`; each flag may also come from GPUWERK_SERVER_URL, GPUWERK_RELAY_TOKEN,
/// GPUWERK_SSH_LISTEN, GPUWERK_HOST_KEY, GPUWERK_RELAY_KEY, GPUWERK_RELAY_NAME,
/// GPUWERK_LOG_LEVEL. The relay asks the server for every login (relay::HttpRelayAuthorizer with
/// TOKEN, an operator's API token), re-checks open relay sessions every second, and reports its
/// relay sessions to the server under NAME (default: the machine's host name; "local" is
/// refused) with relay::HttpRelaySessionLog, as well as one line each in its own log. When
/// parsed, the command runs until SIGINT or SIGTERM and stores its exit status in `exit_code` (0
/// after a clean stop, 1 when it cannot start, 2 for bad flags).
void AddRelayCommand(CLI::App& app, int& exit_code);

}  // namespace gpuwerk::app
