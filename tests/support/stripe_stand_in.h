#pragma once

// A local stand-in for the Stripe API endpoints gpuwerk uses (not Stripe):
// tests/support/stripe_stand_in.py as a child process. Its shapes and parameter names come from
// Stripe's published OpenAPI description (tests/support/stripe_openapi_subset.json, API version
// in StripeStandIn::kApiVersion); it checks every request's parameters against it and
// idempotency keys as Stripe does, and has test hooks (/_test/…) that "pay" a Checkout and
// deliver signed webhooks. See the script's docstring for the hooks.
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

#include "tests/support/source_dir.h"

namespace gpuwerk::testing {

/// The child process. Killed (and reaped) by Stop or the destructor; PR_SET_PDEATHSIG kills it
/// if this test process dies first.
class StripeStandIn {
 public:
  /// The Stripe API version the stand-in speaks (the subset's api_version).
  static constexpr const char* kApiVersion = "2023-08-16";

  StripeStandIn() = default;
  StripeStandIn(const StripeStandIn&) = delete;
  StripeStandIn& operator=(const StripeStandIn&) = delete;
  ~StripeStandIn() { Stop(); }

  /// Why the stand-in cannot run here, or nullopt when it can.
  static std::optional<std::string> Unavailable() {
    if (::access("/usr/bin/python3", X_OK) != 0) return std::string("/usr/bin/python3 is missing");
    return std::nullopt;
  }

  /// Starts it on any free port, requiring `api_key` as the Bearer key and signing webhooks for
  /// `webhook_url` (may be "" and set later through POST /_test/webhook) with `webhook_secret`.
  /// False with a reason in `error` when it did not report "listening <port>" within 20 s.
  bool Start(const std::string& api_key, const std::string& webhook_url,
             const std::string& webhook_secret, std::string* error) {
    std::vector<std::string> args = {
        "/usr/bin/python3",
        (std::filesystem::path(SourceDir()) / "tests/support/stripe_stand_in.py").string(),
        "0",
        "--api-key",
        api_key,
        "--webhook-url",
        webhook_url,
        "--webhook-secret",
        webhook_secret};
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
        *error = "the Stripe stand-in did not start within 20 s";
        return false;
      }
      char buf[256];
      const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
      if (n <= 0) {
        *error = "the Stripe stand-in exited before listening (see stderr)";
        return false;
      }
      line.append(buf, static_cast<size_t>(n));
    }
    if (std::sscanf(line.c_str(), "listening %d", &port_) != 1) {
      *error = "unexpected first line from the Stripe stand-in: " + line;
      return false;
    }
    return true;
  }

  /// Terminates and reaps it; idempotent.
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
  /// "http://127.0.0.1:<port>": the API base URL to configure (Stripe's is https://api.stripe.com).
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
};

}  // namespace gpuwerk::testing
