#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gpuwerk::testing {

/// A long-running child process (a `gpuwerk server`, a `gpuwerk agent`) started with
/// posix_spawn: its stdout and stderr go to a log file, its environment is this process's plus
/// `env` (an empty value removes the variable). The test keeps the pid, so it can `kill -9` it
/// and wait for it. The destructor kills (SIGKILL) and reaps a child that still runs.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Kill(SIGKILL); }

  /// Starts `argv` (argv[0] a path). Returns false (and an explanation in `error()`) when the
  /// process could not be spawned.
  bool Start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::filesystem::path& log) {
    Kill(SIGKILL);
    log_ = log;
    status_.reset();
    std::map<std::string, std::string> merged;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string kv(*e);
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) {
      if (v.empty()) {
        merged.erase(k);
      } else {
        merged[k] = v;
      }
    }
    std::vector<std::string> env_text;
    for (const auto& [k, v] : merged) env_text.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv;
    std::vector<char*> argp;
    for (auto& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // The test's own signal mask and dispositions must not leak into the child.
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argp[0], &actions, &attr, argp.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
      error_ = std::string("posix_spawn ") + args[0] + ": " + std::strerror(rc);
      return false;
    }
    pid_ = pid;
    return true;
  }

  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  const std::filesystem::path& log() const { return log_; }

  /// Whether the child still runs (reaps it when it has exited).
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = status;
      pid_ = -1;
      return false;
    }
    return r == 0;
  }

  /// Waits (≤ `limit`) for the child to end; its wait status, or nullopt when it still runs.
  std::optional<int> Wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (Running()) {
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }

  /// The wait status of the ended child (nullopt while it runs or when never started).
  std::optional<int> status() const { return status_; }

  /// Sends `sig` and, for SIGKILL, reaps the child. No-op when nothing runs.
  void Kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    if (sig == SIGKILL) Wait(std::chrono::seconds(10));
  }

  /// SIGTERM, then SIGKILL after `grace`. Returns the wait status (nullopt when nothing ran).
  std::optional<int> Stop(std::chrono::milliseconds grace = std::chrono::seconds(5)) {
    if (pid_ <= 0) return std::nullopt;
    ::kill(pid_, SIGTERM);
    if (!Wait(grace)) Kill(SIGKILL);
    return status_;
  }

  /// "exit 0", "exit 3", "signal 9 (Killed)" for a wait status.
  static std::string Describe(int status) {
    if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
      return "signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) +
             ")";
    }
    return "status " + std::to_string(status);
  }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::filesystem::path log_;
  std::string error_;
};

}  // namespace gpuwerk::testing
