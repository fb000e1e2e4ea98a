#pragma once

// Test helpers around a real OpenSSH sshd (openssh-server): free loopback ports, a TCP connect,
// and an sshd on a free port with its own host key and authorized_keys, standing in for an
// instance's sshd. Header-only; used by src/relay/relay_test.cc and the relay integration tests.
// Needs root: sshd logs in as the test's user.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "protocol/relay_principal.h"
#include "tests/support/net.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {

/// A blocking TCP connection to `address`:`port` (IPv4, default 127.0.0.1); -1 when refused.
inline int Connect(uint16_t port, const char* address = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, address, &a.sin_addr);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// What a host agent writes for the relay into the authorized_keys of a container of each of
/// `instance_ids` (agent::RelayCaKeyLine; docs/ssh.md "Upstream: the relay credential"): the
/// relay CA (`ca_public_line`, "ssh-ed25519 AAAA… [comment]") trusted for that instance's
/// certificates alone. Several ids: one sshd standing in for several instances.
inline std::string RelayCaLines(const std::string& ca_public_line,
                                const std::vector<std::string>& instance_ids) {
  std::string key = ca_public_line;
  while (!key.empty() && (key.back() == '\n' || key.back() == ' ')) key.pop_back();
  std::string out;
  for (const std::string& id : instance_ids) {
    out += "cert-authority,principals=\"" + protocol::RelayInstancePrincipal(id).value() + "\" " +
           key + "\n";
  }
  return out;
}

/// Where a test sshd listens and what it tells the sessions it serves.
struct SshdOptions {
  std::string listen_address = "127.0.0.1";  ///< an IPv4 loopback address (127.0.0.0/8)
  /// Set as GPUWERK_TEST_SSHD in every session (sshd's SetEnv), so a test can tell which sshd it
  /// landed in; "" sets nothing.
  std::string name;
};

/// A real OpenSSH sshd on a free loopback port, its own host key, and an authorized_keys file in
/// `dir` (the instance's sshd as the relay sees it). Logins as the test's user (root here).
/// `SetEnv SHLVL=1` keeps bash from reading the login user's ~/.bashrc for commands run over SSH
/// (Debian's bash does when SHLVL < 2): this machine's root .bashrc runs `pyenv rehash`, which is
/// slow and leaves a stale lock behind when a test kills the session mid-way.
class Sshd {
 public:
  Sshd(const std::filesystem::path& dir, const std::string& authorized_keys,
       const SshdOptions& options = {})
      : dir_(dir), address_(options.listen_address) {
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace);
    std::filesystem::create_directories("/run/sshd");
    std::system(("ssh-keygen -q -N '' -t ed25519 -f '" + (dir_ / "host_key").string() +
                 "' </dev/null >/dev/null 2>&1")
                    .c_str());
    { std::ofstream(dir_ / "authorized_keys") << authorized_keys; }
    std::filesystem::permissions(
        dir_ / "authorized_keys",
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
        std::filesystem::perm_options::replace);
    port_ = FreePort();
    const std::filesystem::path config = dir_ / "sshd_config";
    const std::string set_env =
        options.name.empty() ? "SHLVL=1" : "SHLVL=1 GPUWERK_TEST_SSHD=" + options.name;
    std::ofstream(config) << "Port " << port_ << "\nListenAddress " << address_ << "\nHostKey "
                          << (dir_ / "host_key").string() << "\nAuthorizedKeysFile "
                          << (dir_ / "authorized_keys").string()
                          << "\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                             "UsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\n"
                             "PidFile none\nAllowTcpForwarding yes\nAcceptEnv LANG "
                             "GPUWERK_*\nMaxStartups 100\nSetEnv "
                          << set_env
                          << "\n"
                             "Subsystem sftp /usr/lib/openssh/sftp-server\nLogLevel ERROR\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = (dir_ / "sshd.log").string();
      std::freopen(log.c_str(), "w", stderr);
      ::execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-e", "-f", config.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      int fd = Connect(port_, address_.c_str());
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "sshd did not start: " << ReadFile(dir_ / "sshd.log");
  }
  ~Sshd() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  uint16_t port() const { return port_; }
  /// Replaces its authorized_keys (sshd reads the file at each login).
  void SetAuthorizedKeys(const std::string& authorized_keys) {
    { std::ofstream(dir_ / "authorized_keys") << authorized_keys; }
    std::filesystem::permissions(
        dir_ / "authorized_keys",
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
        std::filesystem::perm_options::replace);
  }
  /// Its ed25519 host key as an agent reports it: "ssh-ed25519 BASE64" (no comment).
  std::string HostKeyLine() const {
    std::ifstream in(dir_ / "host_key.pub");
    std::string type, blob;
    in >> type >> blob;
    return type + " " + blob;
  }
  /// Gives it a new host key behind everyone's back: a new key file, then SIGHUP (sshd executes
  /// itself again and reads its host keys); returns once it listens again.
  void ReplaceHostKey() {
    std::filesystem::remove(dir_ / "host_key");
    std::filesystem::remove(dir_ / "host_key.pub");
    std::system(("ssh-keygen -q -N '' -t ed25519 -f '" + (dir_ / "host_key").string() +
                 "' </dev/null >/dev/null 2>&1")
                    .c_str());
    ::kill(pid_, SIGHUP);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int i = 0; i < 200; ++i) {
      int fd = Connect(port_, address_.c_str());
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "sshd did not listen again after SIGHUP: " << ReadFile(dir_ / "sshd.log");
  }
  /// Stops (SIGSTOP) every process serving a connection (the listener's descendants), so that
  /// nothing already connected gets an answer until ResumeConnections; new connections are still
  /// accepted and served.
  void PauseConnections() { SignalConnections(SIGSTOP); }
  /// Lets the processes stopped by PauseConnections go on (SIGCONT).
  void ResumeConnections() { SignalConnections(SIGCONT); }

 private:
  /// Sends `signal` to every descendant of the listener, read from /proc/*/stat.
  void SignalConnections(int signal) {
    std::map<pid_t, pid_t> parent;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(entry.path() / "stat");
      std::string line;
      if (!std::getline(stat, line)) continue;
      const auto close = line.rfind(')');  // the command may hold spaces and parentheses
      if (close == std::string::npos) continue;
      char state = 0;
      int ppid = 0;
      if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
      parent[static_cast<pid_t>(std::stol(name))] = static_cast<pid_t>(ppid);
    }
    for (const auto& [pid, ppid] : parent) {
      for (pid_t up = ppid; up > 1;) {
        if (up == pid_) {
          ::kill(pid, signal);
          break;
        }
        auto it = parent.find(up);
        if (it == parent.end()) break;
        up = it->second;
      }
    }
  }

  std::filesystem::path dir_;
  std::string address_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace gpuwerk::testing
