#pragma once

// What the tests' server starters share (tests/support/smtp_sink.h, stripe_stand_in.h,
// postgres_server.h): a child that says on its first line of stdout which port it listens on,
// stopping a child with a signal and a grace period, and reading a child's log file.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpuwerk::testing {

/// Sends `sig` to the child `pid`, waits up to `grace` for it to end, then kills it (SIGKILL) and
/// reaps it. Returns its wait status; nullopt when `pid` is not a child of this process (or
/// not positive).
inline std::optional<int> StopChild(pid_t pid, int sig, std::chrono::milliseconds grace) {
  if (pid <= 0) return std::nullopt;
  ::kill(pid, sig);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  if (::waitpid(pid, &status, 0) != pid) return std::nullopt;
  return status;
}

/// The whole text of the file at `path` ("" when it cannot be read): a child's log.
inline std::string ReadTextFile(const std::filesystem::path& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

/// A child process (a test server written in Python: the SMTP sink, the Stripe stand-in) that
/// binds its port itself and writes "listening <port>" as its first line of stdout; its stderr
/// stays the test's. Stopped (SIGTERM, then SIGKILL after 5 s) and reaped by Stop or the
/// destructor; PR_SET_PDEATHSIG kills it should the test process die first.
class ListeningChild {
 public:
  ListeningChild() = default;
  ListeningChild(const ListeningChild&) = delete;
  ListeningChild& operator=(const ListeningChild&) = delete;
  ~ListeningChild() { Stop(); }

  /// Starts `args` (args[0] a path) and reads its first line. False with a reason in `error` (the
  /// reason names the child as `what`, e.g. "the SMTP sink") when it could not be started, exited,
  /// or did not say "listening <port>" within 20 s.
  bool Start(std::vector<std::string> args, const std::string& what, std::string* error) {
    Stop();
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      *error = "pipe2 failed";
      return false;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(fds[1], STDOUT_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    stdout_fd_ = fds[0];
    if (pid_ < 0) {
      *error = "fork failed";
      return false;
    }
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd pfd{.fd = stdout_fd_, .events = POLLIN, .revents = 0};
      if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
        *error = what + " did not start within 20 s";
        return false;
      }
      char buf[256];
      const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
      if (n <= 0) {
        *error = what + " exited before listening (see stderr)";
        return false;
      }
      line.append(buf, static_cast<size_t>(n));
    }
    if (std::sscanf(line.c_str(), "listening %d", &port_) != 1) {
      *error = "unexpected first line from " + what + ": " + line;
      return false;
    }
    return true;
  }

  /// Terminates and reaps the child; idempotent.
  void Stop() {
    StopChild(pid_, SIGTERM, std::chrono::seconds(5));
    pid_ = -1;
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    stdout_fd_ = -1;
  }

  /// The port the child said it listens on (0 before a successful Start).
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
};

}  // namespace gpuwerk::testing
