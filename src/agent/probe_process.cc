#include "agent/probe_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string_view>

namespace gpuwerk::agent {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxAnswer = 64 * 1024;
constexpr size_t kMaxKeyLine = 16 * 1024;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

/// Closes `fd` when it is open.
void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

/// Writes all of `data` to `fd` (a stream socket; MSG_NOSIGNAL: a child that died first costs
/// an error, never the agent's SIGPIPE); false on error.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

LoginProbe ParseOutcome(std::string_view name, bool* ok) {
  *ok = true;
  for (LoginProbe p : {LoginProbe::kAccepted, LoginProbe::kRefused, LoginProbe::kNoAnswer,
                       LoginProbe::kUnsupported}) {
    if (name == LoginProbeName(p)) return p;
  }
  *ok = false;
  return LoginProbe::kNoAnswer;
}

/// In the child, between fork and execve: only async-signal-safe calls (raw system calls); on any
/// failure it exits 126 without running the program.
[[noreturn]] void Child(int stdin_fd, int stdout_fd, int null_fd, pid_t parent, bool drop,
                        uid_t uid, gid_t gid, const struct rlimit* limits, const int* resources,
                        int n_limits, char* const* argv, char* const* envp) {
  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(null_fd, 2) < 0) _exit(126);
  // Nothing else of the agent's: the engine socket, state files, the server connection.
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) _exit(126);
  for (int i = 0; i < n_limits; ++i) {
    if (::setrlimit(static_cast<__rlimit_resource_t>(resources[i]), &limits[i]) != 0) _exit(126);
  }
  if (drop) {
    // Raw system calls: they change this (the only) thread, with no glibc bookkeeping.
    if (::syscall(SYS_setgroups, 0, nullptr) != 0) _exit(126);
    if (::syscall(SYS_setresgid, gid, gid, gid) != 0) _exit(126);
    if (::syscall(SYS_setresuid, uid, uid, uid) != 0) _exit(126);
    if (::syscall(SYS_getuid) != static_cast<long>(uid)) _exit(126);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(126);
  ::execve(argv[0], argv, envp);
  _exit(127);
}

}  // namespace

std::vector<std::string> SelfLoginProbeCommand() {
  return {"/proc/self/exe", kLoginProbeSubcommand};
}

LoginProbeAnswer ProbeLoginConfined(const ConfinedProbeOptions& options, const std::string& host,
                                    uint16_t port, const std::string& user,
                                    const std::string& authorized_key_line,
                                    std::chrono::milliseconds timeout) {
  LoginProbeAnswer answer;
  if (options.command.empty()) {
    answer.error = "no login probe program is configured";
    return answer;
  }
  if (authorized_key_line.size() > kMaxKeyLine) {
    answer.outcome = LoginProbe::kUnsupported;
    answer.error = "the key line is too long";
    return answer;
  }
  const auto limit_ms = std::max<int64_t>(1, timeout.count());
  // Everything the child needs, made before fork (the child may only make system calls).
  std::vector<std::string> args = options.command;
  args.push_back(host);
  args.push_back(std::to_string(port));
  args.push_back(user);
  args.push_back(std::to_string(limit_ms));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name); value != nullptr) {
      env.push_back(std::string(name) + "=" + value);
    }
  }
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  const bool drop = ::geteuid() == 0;
  uid_t uid = 65534;
  gid_t gid = 65534;
  if (drop) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(options.user.c_str(), &pw, buf.data(), buf.size(), &found) == 0 &&
        found != nullptr) {
      uid = found->pw_uid;
      gid = found->pw_gid;
    }
    if (uid == 0) {
      answer.error = "the login probe's user " + options.user + " is root";
      return answer;
    }
  }
  const rlim_t cpu_seconds = static_cast<rlim_t>((limit_ms + 999) / 1000 + 2);
  std::vector<int> resources = {RLIMIT_CORE, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CPU};
  std::vector<struct rlimit> limits = {{0, 0}, {0, 0}, {64, 64}, {cpu_seconds, cpu_seconds}};
  if (!kAddressSanitizer) {
    // AddressSanitizer reserves terabytes of address space and LeakSanitizer clones at exit.
    resources.push_back(RLIMIT_AS);
    limits.push_back({rlim_t{1} << 30, rlim_t{1} << 30});
    if (drop) {
      resources.push_back(RLIMIT_NPROC);
      limits.push_back({0, 0});
    }
  }

  int in_pipe[2] = {-1, -1};
  int out_pipe[2] = {-1, -1};
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0 || ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_pipe) != 0 ||
      ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    answer.error = std::string("cannot make the probe's pipes: ") + std::strerror(errno);
    CloseFd(null_fd);
    CloseFd(in_pipe[0]);
    CloseFd(in_pipe[1]);
    CloseFd(out_pipe[0]);
    CloseFd(out_pipe[1]);
    return answer;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    Child(in_pipe[0], out_pipe[1], null_fd, parent, drop, uid, gid, limits.data(), resources.data(),
          static_cast<int>(resources.size()), argv.data(), envp.data());
  }
  CloseFd(in_pipe[0]);
  CloseFd(out_pipe[1]);
  CloseFd(null_fd);
  if (pid < 0) {
    answer.error = std::string("cannot start the login probe: ") + std::strerror(errno);
    CloseFd(in_pipe[1]);
    CloseFd(out_pipe[0]);
    return answer;
  }
  // The key line fits the socket's buffer (16 KiB at most): no wait here.
  if (!WriteAll(in_pipe[1], authorized_key_line + "\n")) {
    answer.error = "cannot give the login probe its key";
  }
  CloseFd(in_pipe[1]);

  const auto deadline = Clock::now() + std::chrono::milliseconds(limit_ms) + options.grace;
  std::string out;
  bool killed = false;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd p{out_pipe[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its stdout: it is done
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxAnswer) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
  }
  CloseFd(out_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (killed) {
    answer.outcome = LoginProbe::kNoAnswer;
    answer.error = out.size() > kMaxAnswer ? "the login probe said too much; killed"
                                           : "the login probe ran past its deadline; killed";
    return answer;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    answer.outcome = LoginProbe::kNoAnswer;
    answer.error = WIFEXITED(status)
                       ? "the login probe exited with status " + std::to_string(WEXITSTATUS(status))
                       : "the login probe died of signal " + std::to_string(WTERMSIG(status));
    return answer;
  }
  const size_t first = out.find('\n');
  bool ok = false;
  answer.outcome = ParseOutcome(std::string_view(out).substr(0, first), &ok);
  if (!ok || first == std::string::npos) {
    answer.outcome = LoginProbe::kNoAnswer;
    answer.error = "the login probe's answer is not one";
    return answer;
  }
  std::string_view key = std::string_view(out).substr(first + 1);
  key = key.substr(0, key.find('\n'));
  // "TYPE BASE64": printable ASCII only, bounded.
  const bool printable = key.size() <= 16384 && std::all_of(key.begin(), key.end(), [](char c) {
                           return c >= 0x20 && c < 0x7f;
                         });
  if (printable) answer.server_host_key = std::string(key);
  return answer;
}

int LoginProbeMain(const std::vector<std::string>& args) {
  auto usage = [](std::string_view why) {
    std::cout << "usage: gpuwerk login-probe HOST PORT USER TIMEOUT_MS (key line on stdin): " << why
              << "\n";
    return 2;
  };
  if (args.size() != 4) return usage("four arguments expected");
  unsigned port = 0;
  int64_t timeout_ms = 0;
  const std::string& p = args[1];
  const std::string& t = args[3];
  if (std::from_chars(p.data(), p.data() + p.size(), port).ec != std::errc() || port == 0 ||
      port > 65535) {
    return usage("bad port");
  }
  if (std::from_chars(t.data(), t.data() + t.size(), timeout_ms).ec != std::errc() ||
      timeout_ms <= 0 || timeout_ms > 600'000) {
    return usage("bad timeout");
  }
  std::string key_line;
  char c = 0;
  while (key_line.size() < kMaxKeyLine && std::cin.get(c) && c != '\n') key_line += c;
  std::string server_host_key;
  const LoginProbe outcome = ProbeLogin(args[0], static_cast<uint16_t>(port), args[2], key_line,
                                        std::chrono::milliseconds(timeout_ms), &server_host_key);
  std::cout << LoginProbeName(outcome) << "\n" << server_host_key << "\n" << std::flush;
  return 0;
}

}  // namespace gpuwerk::agent
