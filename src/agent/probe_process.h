#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/login_probe.h"

namespace gpuwerk::agent {

/// How the agent runs its login probe (ProbeLogin, a libssh client talking to an sshd the tenant
/// controls) out of its own process: the agent holds the container engine's socket, which is
/// root on the host, so a libssh client bug must not run there (issue 12 finding 9).
struct ConfinedProbeOptions {
  /// The program and its leading arguments; the probe's own arguments follow (LoginProbeMain).
  /// The gpuwerk binary: {"/proc/self/exe", "login-probe"} (the agent's own executable, even if
  /// the file was replaced since it started). Empty: no probe can run (kNoAnswer, error said).
  std::vector<std::string> command;
  /// The user the child runs as when the agent runs as root (uid 0): its uid and gid from the
  /// password database, no supplementary groups. A user that does not exist: uid/gid 65534.
  std::string user = "nobody";
  /// What the child may take beyond the probe's own time limit before it is killed (SIGKILL).
  std::chrono::milliseconds grace = std::chrono::seconds(2);
};

/// The name of the gpuwerk binary's hidden subcommand that runs LoginProbeMain.
inline constexpr const char* kLoginProbeSubcommand = "login-probe";

/// The command that runs the probe with the agent's own executable: {"/proc/self/exe",
/// "login-probe"} (the gpuwerk binary; a test binary must name a program instead).
std::vector<std::string> SelfLoginProbeCommand();

/// What a confined probe found.
struct LoginProbeAnswer {
  LoginProbe outcome = LoginProbe::kNoAnswer;
  /// The host key the sshd presented ("TYPE BASE64"), when it answered; "" otherwise.
  std::string server_host_key;
  /// Why there is no answer from the child itself (it could not start, was killed at the
  /// deadline, or said something that is not an answer); "" when the child answered. For logs.
  std::string error;
};

/// ProbeLogin(host, port, user, authorized_key_line, timeout) run in a child process made with
/// fork + execve of `options.command` (the gpuwerk binary's hidden `login-probe` subcommand):
///   - no descriptor of the agent's but the child's stdin (the key line, a pipe), stdout (the
///     answer, a pipe) and stderr (/dev/null): the engine socket, the state files, the server
///     connection are closed (close_range) before execve;
///   - an environment of PATH only (plus the sanitizers' *SAN_OPTIONS in test builds): no token
///     the agent read from its environment;
///   - when the agent is root: setgroups(0), setgid and setuid to `options.user` (nobody), and
///     NoNewPrivs, so the child holds no privilege and cannot regain one;
///   - rlimits: no core files, no file writes (RLIMIT_FSIZE 0), 64 descriptors, CPU seconds of the
///     time limit plus two, and (builds without AddressSanitizer) 1 GiB of address space and no
///     new processes; it dies with the agent (PR_SET_PDEATHSIG);
///   - a deadline: `timeout` + `options.grace`, after which it is killed and reaped.
/// The answer is read from at most 64 KiB of the child's stdout. Thread-safe; blocks the caller
/// for at most the deadline. Never throws.
LoginProbeAnswer ProbeLoginConfined(const ConfinedProbeOptions& options, const std::string& host,
                                    uint16_t port, const std::string& user,
                                    const std::string& authorized_key_line,
                                    std::chrono::milliseconds timeout);

/// The child's side (`gpuwerk login-probe HOST PORT USER TIMEOUT_MS`, the key line on stdin, at
/// most 16 KiB): runs ProbeLogin and prints the outcome's name (LoginProbeName) on the first line
/// and the presented host key on the second. Returns 0, or 2 for bad arguments (a line on stdout
/// says why). `args` are the arguments after the subcommand's name.
int LoginProbeMain(const std::vector<std::string>& args);

}  // namespace gpuwerk::agent
