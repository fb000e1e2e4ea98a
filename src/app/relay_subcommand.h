#pragma once

#include <CLI/CLI.hpp>

namespace gpuwerk::app {

/// Registers `gpuwerk relay` (DESIGN.md "Command line"; docs/ssh.md) on `app` with the options
/// of RelayOptions() (each a flag, a `GPUWERK_<KEY>` variable and a key of `--config FILE` or
/// GPUWERK_RELAY_CONFIG; precedence flags > environment > file > default). The relay asks the
/// server for every login (relay::HttpRelayAuthorizer with its relay credential, "gwr_…", from
/// GPUWERK_RELAY_TOKEN, --token-file or the config file, never argv; docs/ssh.md "The relay's
/// API credential"), re-checks open relay sessions when the server's watch stream names a change
/// (relay::HttpRelayWatch) and every --recheck-interval-seconds (15) as a backstop, and reports
/// its relay sessions to the server, which files them under the credential's name, with
/// relay::HttpRelaySessionLog, as well as one line each in its own log. When parsed, the command
/// runs until SIGINT or SIGTERM and stores its exit status in `exit_code` (0 after a clean stop, 1
/// when it cannot start, 2 for bad options).
void AddRelayCommand(CLI::App& app, int& exit_code);

}  // namespace gpuwerk::app
