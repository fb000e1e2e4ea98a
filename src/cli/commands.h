#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

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
  /// Waits between the looks of `--wait`; null: std::this_thread::sleep_for. Tests substitute one
  /// that only moves `now` on.
  std::function<void(std::chrono::milliseconds)> sleep;
  /// The monotonic time `--wait`'s timeout is measured in; null: std::chrono::steady_clock.
  std::function<std::chrono::steady_clock::time_point()> now;

  /// The process's: getenv, std::cin / std::cout / std::cerr, isatty(0).
  static ClientIo Process();
};

/// Registers the API client verbs on `app` (the `gpuwerk` root command):
///   login [--url URL] [--email EMAIL] [--password-stdin] [--token TOKEN]
///   signup [--url URL] [--email EMAIL] [--password-stdin]
///   logout
///   whoami
///   keys ls | keys add NAME [FILE|-] | keys rm NAME
///   tokens ls | tokens create NAME | tokens rm ID
///   queue join --gpu-type T NAME --key KEY | queue ls | queue leave ID|NAME
///   usage queue
///   gpu-types
///   instances ls|show|create|restart|rm|relay-sessions … | ssh NAME [-- ARGS…]
///     (create and restart take --wait [--wait-timeout SECONDS])
///   events [--count N]
///   team create NAME | team show | team invite EMAIL | team revoke ID|EMAIL
///     | team remove EMAIL|ID | team leave | team role EMAIL|ID owner|member
///   admin hosts add|ls|drain|undrain|rm|link|unlink … | admin gpu-types ls|set …
///   admin relay-sessions [--instance ID] [--person ID] [--page N]
///   admin invite EMAIL
///   admin audit [--actor EMAIL|ID] [--target ID] [--page N]
/// Every verb but login and signup also takes `--url URL` and `--token TOKEN`, which override
/// GPUWERK_URL / GPUWERK_TOKEN and the login file (see ResolveTarget). Every verb takes `--json`:
/// its result as JSON on stdout, and a failure as one line of problem JSON on stderr
/// (`{"type":"about:blank","title":…,"code":…,"detail":…}`). A verb's callback runs during
/// app.parse() and sets `exit_code`: 0 on success, 1 on failure after printing one line
/// `gpuwerk: <message> (<code>)` (or the problem JSON) to stderr. Usage errors are CLI11's
/// (thrown from parse(); see ReportUsageError). `app` and `exit_code` must outlive the parse;
/// the option storage is owned by the callbacks.
void AddClientCommands(CLI::App& app, int& exit_code);

/// As above, reading and writing through `io` instead of the process's streams and environment.
void AddClientCommands(CLI::App& app, int& exit_code, ClientIo io);

/// Reports a usage error thrown by `app.parse()` as `gpuwerk` does, and returns CLI11's exit
/// code for it (0 for --help and --version, which print as CLI11 does). A word where a verb
/// belongs that is none gets one line naming it and the closest verb path, e.g.
/// "gpuwerk: 'instance' is not a command of `gpuwerk`; did you mean `gpuwerk instances ls`?"
/// (EditDistance over the names and aliases at that level). ssh's own options given to `gpuwerk
/// ssh` before `--` get one line saying they go after `--`, with the command reordered (e.g.
/// "`gpuwerk ssh alpha -- -i KEY hostname`"). Any other parse error is one line too, in the
/// CLI's words, naming the command's help: "gpuwerk: unknown option --foo; see `gpuwerk
/// instances create --help`", "gpuwerk: NAME is required; see `gpuwerk keys add --help`". With
/// `--json` among `args` the error is one line of problem JSON on `err` with a stable code:
/// "unknown_command", "unknown_option", "missing_argument" (a required option or positional
/// missing, or too few values), "unexpected_argument" (a surplus positional) or "usage_error"
/// (anything else, e.g. a value that does not convert). `args` are the arguments without the
/// program name. The caller exits with 2 for any non-zero result.
int ReportUsageError(CLI::App& app, const CLI::ParseError& error,
                     const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The Levenshtein distance between `a` and `b` (insertions, deletions and substitutions of
/// bytes, each costing 1).
size_t EditDistance(std::string_view a, std::string_view b);

}  // namespace gpuwerk::cli
