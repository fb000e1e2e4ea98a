#pragma once

#include <CLI/CLI.hpp>
#include <iosfwd>

#include "cli/login_file.h"

namespace gpuwerk::cli {

/// Where the client verbs read, write and look up the environment. Tests substitute string
/// streams and a map-backed environment.
struct ClientIo {
  EnvLookup env;
  std::istream* in = nullptr;
  std::ostream* out = nullptr;  ///< results: tables, JSON, the new token's secret
  std::ostream* err = nullptr;  ///< prompts, warnings and the one-line `gpuwerk: …` failure
  /// Whether `in` is an interactive terminal: then `login` prompts and reads the password with
  /// echo off (termios on file descriptor 0).
  bool in_is_terminal = false;

  /// The process's: getenv, std::cin / std::cout / std::cerr, isatty(0).
  static ClientIo Process();
};

/// Registers the API client verbs on `app` (the `gpuwerk` root command):
///   login [--url URL] [--email EMAIL] [--password-stdin] [--token TOKEN]
///   logout
///   whoami [--json]
///   keys ls [--json] | keys add NAME [FILE|-] [--json] | keys rm NAME
///   tokens ls [--json] | tokens create NAME [--json] | tokens rm ID
///   queue join --gpu-type T NAME --key KEY [--json] | queue ls [--json] | queue leave ID|NAME
///   usage queue [--json]
///   gpu-types [--json]
///   instances ls|show|create|restart|rm|relay-sessions … | ssh NAME [-- ARGS…]
///   events [--json] [--count N]
///   admin hosts add|ls|drain|undrain|rm|link|unlink … | admin gpu-types ls|set …
///   admin relay-sessions [--instance ID] [--person ID] [--page N] [--json]
/// Every verb but login also takes `--url URL` and `--token TOKEN`, which override GPUWERK_URL /
/// GPUWERK_TOKEN and the login file (see ResolveTarget). A verb's callback runs during
/// app.parse() and sets `exit_code`: 0 on success, 1 on failure after printing one line
/// `gpuwerk: <message> (<code>)` to stderr. Usage errors are CLI11's (thrown from parse()).
/// `app` and `exit_code` must outlive the parse; the option storage is owned by the callbacks.
void AddClientCommands(CLI::App& app, int& exit_code);

/// As above, reading and writing through `io` instead of the process's streams and environment.
void AddClientCommands(CLI::App& app, int& exit_code, ClientIo io);

}  // namespace gpuwerk::cli
