#pragma once
// Test-only: what the tests of the confined login probe (issue 12 finding 9) need to see it
// run: an sshd that hangs, and the probe's child read back through /proc.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace gpuwerk::agent::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline std::string SlurpProc(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// A TCP listener on 127.0.0.1 that accepts connections and never says anything (an sshd that
/// hangs): the probe waits there until its time limit.
class Tarpit {
 public:
  Tarpit() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client >= 0) {
          held_.push_back(client);
          ++accepted_;
        }
      }
    });
  }
  ~Tarpit() {
    stop_ = true;
    thread_.join();
    for (int c : held_) ::close(c);
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  /// Connections accepted so far.
  int accepted() const { return accepted_.load(); }
  /// Waits (≤ 5 s) until `n` connections were accepted; false when they did not come.
  bool WaitForConnections(int n) const {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (accepted_.load() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    return accepted_.load() >= n;
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<int> held_;
  std::thread thread_;
};

/// The pids of this process's children that run `program` (their /proc/PID/exe).
inline std::vector<pid_t> ChildrenRunning(const fs::path& program) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = SlurpProc(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != ::getpid()) continue;
    std::error_code link_ec;
    if (fs::read_symlink(e.path() / "exe", link_ec) == fs::canonical(program)) {
      out.push_back(std::stoi(name));
    }
  }
  return out;
}

/// Waits (≤ 5 s) for a child running `program`; nullopt when none came.
inline std::optional<pid_t> WaitForChild(const fs::path& program) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto found = ChildrenRunning(program);
    if (!found.empty()) return found.front();
    std::this_thread::sleep_for(2ms);
  }
  return std::nullopt;
}

/// The value of `field` ("Uid:", "NoNewPrivs:") in /proc/PID/status.
inline std::string StatusField(pid_t pid, const std::string& field) {
  std::istringstream in(SlurpProc("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(field)) return line.substr(field.size());
  }
  return "";
}

/// What the child's descriptors point at (readlink of /proc/PID/fd/N), by number.
inline std::map<int, std::string> Descriptors(pid_t pid) {
  std::map<int, std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code link_ec;
    out[std::stoi(e.path().filename().string())] = fs::read_symlink(e.path(), link_ec).string();
  }
  return out;
}

}  // namespace gpuwerk::agent::testing
