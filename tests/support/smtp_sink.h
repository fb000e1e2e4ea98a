#pragma once

// A real SMTP server for tests: tests/support/smtp_sink.py (aiosmtpd) as a child process that
// stores every received message as an .eml file.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/source_dir.h"

namespace gpuwerk::testing {

namespace fs = std::filesystem;

inline constexpr const char* kPython = "/usr/bin/python3";

/// Why the real SMTP server cannot run here, or nullopt when it can.
inline std::optional<std::string> SinkUnavailable() {
  if (::access(kPython, X_OK) != 0) return std::string(kPython) + " is missing";
  if (std::system("/usr/bin/python3 -c 'import aiosmtpd' >/dev/null 2>&1") != 0) {
    return "python3-aiosmtpd is not installed (scripts/setup.sh installs it)";
  }
  return std::nullopt;
}

/// tests/support/smtp_sink.py as a child process. Killed (and reaped) by Stop or the destructor;
/// PR_SET_PDEATHSIG kills it if this test process dies first.
class SmtpSink {
 public:
  SmtpSink() = default;
  SmtpSink(const SmtpSink&) = delete;
  SmtpSink& operator=(const SmtpSink&) = delete;
  ~SmtpSink() { Stop(); }

  /// Starts the sink on `port` (0: any) storing mails in `dir`; returns false with a reason in
  /// `error` when it did not report "listening <port>" within 20 s.
  bool Start(int port, const fs::path& dir, const std::vector<std::string>& extra,
             std::string* error) {
    std::vector<std::string> args = {
        kPython, (fs::path(SourceDir()) / "tests/support/smtp_sink.py").string(),
        std::to_string(port), dir.string()};
    args.insert(args.end(), extra.begin(), extra.end());
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
    // Read the first line: "listening <port>".
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd pfd{.fd = stdout_fd_, .events = POLLIN, .revents = 0};
      if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
        *error = "the SMTP sink did not start within 20 s";
        return false;
      }
      char buf[256];
      const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
      if (n <= 0) {
        *error = "the SMTP sink exited before listening (see stderr)";
        return false;
      }
      line.append(buf, static_cast<size_t>(n));
    }
    if (std::sscanf(line.c_str(), "listening %d", &port_) != 1) {
      *error = "unexpected first line from the SMTP sink: " + line;
      return false;
    }
    return true;
  }

  /// Terminates and reaps the sink; idempotent.
  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      int status = 0;
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    pid_ = -1;
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    stdout_fd_ = -1;
  }

  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
};

}  // namespace gpuwerk::testing
