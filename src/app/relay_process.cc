#include "app/relay_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "core/strings.h"
#include "protocol/api_client.h"
#include "relay/relay_certificates.h"
#include "relay/ssh_key_file.h"

extern char** environ;

namespace gpuwerk::app {
namespace {

using Clock = std::chrono::steady_clock;

/// `address` (numeric) and `port` as a socket address; false when `address` is not numeric.
bool SocketAddress(const std::string& address, uint16_t port, sockaddr_storage& ss,
                   socklen_t& len) {
  ss = {};
  if (auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
      ::inet_pton(AF_INET, address.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
    return true;
  }
  if (auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
      ::inet_pton(AF_INET6, address.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

/// Binds a socket to `address`:`port` (SO_REUSEADDR, as the relay binds) and closes it again:
/// the port bound (the kernel's choice for 0), or errno. Binding fails with EADDRINUSE exactly
/// when a socket listens there.
std::pair<uint16_t, int> ProbeBind(const std::string& address, uint16_t port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!SocketAddress(address, port, ss, len)) return {0, EINVAL};
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {0, errno};
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    const int err = errno;
    ::close(fd);
    return {0, err};
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  ::close(fd);
  return {ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(bound).sin_port
                                           : reinterpret_cast<sockaddr_in6&>(bound).sin6_port),
          0};
}

bool IsListening(const std::string& address, uint16_t port) {
  return ProbeBind(address, port).second == EADDRINUSE;
}

/// "exited with status 1", "was killed by SIGKILL".
std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = ::sigabbrev_np(WTERMSIG(status));
    return "was killed by " +
           (name ? "SIG" + std::string(name) : "signal " + std::to_string(WTERMSIG(status)));
  }
  return "ended (status " + std::to_string(status) + ")";
}

std::string Mib(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

/// "2048 MiB (cgroup v1: memory.limit_in_bytes of …)", or "none (why)".
std::string LimitText(const ChildMemoryLimit& limit) {
  if (limit.kind == MemoryLimitKind::kNone) return "none (" + limit.note + ")";
  std::string text =
      Mib(limit.bytes) + " (" + std::string(MemoryLimitKindName(limit.kind)) + ": " + limit.note;
  if (!limit.cgroup.empty()) text += ", " + limit.cgroup.string();
  return core::BoundedPrintable(text + ")", 1024);
}

}  // namespace

RelayProcess::RelayProcess(RelayProcessOptions options) : options_(std::move(options)) {}

RelayProcess::~RelayProcess() { Stop(); }

core::Result<std::unique_ptr<RelayProcess>> RelayProcess::Start(RelayProcessOptions options) {
  std::unique_ptr<RelayProcess> self(new RelayProcess(std::move(options)));
  const RelayProcessOptions& o = self->options_;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!SocketAddress(o.listen_address, o.listen_port, ss, len)) {
    return core::InvalidArgument("invalid_ssh_listen",
                                 "the relay's listen address must be a numeric IP address");
  }
  if (auto url = protocol::CheckCredentialUrl(o.server_url); !url) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "relay_server_url",
                      "the relay reaches the server at " + o.server_url +
                          ", which must be https:// or http:// to loopback (" +
                          url.error().message +
                          "); listen on 127.0.0.1 or 0.0.0.0, or run no relay (--ssh-listen '')");
  }
  // The relay loads the same file; created here first (link(2) into place, so both agree).
  GPUWERK_ASSIGN_OR_RETURN(auto ca,
                           relay::LoadOrCreateEd25519Key(o.relay_ca_path, "gpuwerk-relay-ca"));
  self->relay_ca_public_line_ = ca.public_line;
  GPUWERK_ASSIGN_OR_RETURN(self->relay_probe_certificate_,
                           relay::MakeProbeCertificate(o.relay_ca_path));
  const auto [port, err] = ProbeBind(o.listen_address, o.listen_port);
  if (err != 0) {
    return core::Fail(core::ErrorCode::kUnavailable, "listen_failed",
                      "the relay cannot listen on " + o.listen_address + ":" +
                          std::to_string(o.listen_port) + ": " + std::strerror(err));
  }
  self->port_ = port;
  const std::string name =
      o.cgroup_name.empty() ? "gpuwerk-relay-" + std::to_string(::getpid()) : o.cgroup_name;
  self->limiter_ = ChildMemoryLimiter::Prepare(o.memory_limit_bytes, name, IsSanitizerBuild());

  RelayProcess* raw = self.get();
  self->supervisor_ = std::thread([raw] { raw->Supervise(); });
  const std::string where = o.listen_address + ":" + std::to_string(self->port_);
  const auto deadline = Clock::now() + o.start_timeout;
  bool listening = false;
  while (Clock::now() < deadline) {
    {
      std::unique_lock lock(self->mu_);
      self->cv_.wait_for(lock, std::chrono::milliseconds(20));
      if (self->starts_ >= 1 && self->pid_ < 0) break;  // ended (or never started)
      if (self->starts_ < 1) continue;
    }
    if (IsListening(o.listen_address, self->port_)) {
      listening = true;
      break;
    }
  }
  if (!listening) {
    self->Stop();
    return core::Fail(core::ErrorCode::kUnavailable, "relay_not_started",
                      "the relay (gpuwerk relay, listening on " + where +
                          ") did not start; its log lines above say why");
  }
  spdlog::info("up: the relay runs in its own process (pid {}) on {}; memory limit: {}",
               self->pid(), where, LimitText(self->memory_limit()));
  return self;
}

pid_t RelayProcess::Spawn() {
  const RelayProcessOptions& o = options_;
  const std::string listen =
      (o.listen_address.find(':') != std::string::npos ? "[" + o.listen_address + "]"
                                                       : o.listen_address) +
      ":" + std::to_string(port_);
  std::vector<std::string> args = {o.program.string(), "relay",
                                   "--server",         o.server_url,
                                   "--listen",         listen,
                                   "--host-key",       o.host_key_path.string(),
                                   "--relay-key",      o.relay_key_path.string(),
                                   "--relay-ca",       o.relay_ca_path.string(),
                                   "--log-level",      o.log_level};
  for (const std::string& cidr : o.trusted_proxies) {
    args.insert(args.end(), {"--relay-trusted-proxies", cidr});
  }
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view v(*e);
    // Its own credential, and no relay config file meant for another relay.
    if (v.starts_with("GPUWERK_RELAY_TOKEN=") || v.starts_with("GPUWERK_RELAY_CONFIG=")) continue;
    env.emplace_back(v);
  }
  env.push_back("GPUWERK_RELAY_TOKEN=" + o.credential);
  std::vector<char*> argv, envp;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string program = o.program.string();

  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    spdlog::error("up: cannot start the relay: pipe: {}", std::strerror(errno));
    return -1;
  }
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  sigset_t none;
  sigemptyset(&none);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: async-signal-safe calls only until exec.
    ::setpgid(0, 0);                     // Ctrl-C in up's terminal reaches up alone
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the thread that started it
    if (::getppid() != parent) ::_exit(127);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (devnull >= 0) ::dup2(devnull, 0);
    char go = 0;
    ssize_t n;
    do {
      n = ::read(gate[0], &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(126);  // the parent gave up on it
    ::close_range(3, ~0U, 0);
    ::execve(program.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  const int fork_error = errno;
  ::close(gate[0]);
  if (devnull >= 0) ::close(devnull);
  if (pid < 0) {
    ::close(gate[1]);
    spdlog::error("up: cannot start the relay: fork: {}", std::strerror(fork_error));
    return -1;
  }
  // Under the limit before it runs a single instruction of the relay.
  const ChildMemoryLimit applied = limiter_.Apply(pid);
  {
    std::lock_guard lock(mu_);
    applied_ = applied;
  }
  if (applied.kind != limiter_.limit().kind) {
    spdlog::warn("up: the relay (pid {}) runs with memory limit {}", pid, LimitText(applied));
  }
  const ssize_t sent = ::write(gate[1], "g", 1);
  ::close(gate[1]);
  if (sent != 1) spdlog::error("up: cannot release the relay (pid {}) to start", pid);
  return pid;
}

void RelayProcess::Supervise() {
  auto backoff = options_.initial_backoff;
  while (true) {
    const pid_t pid = Spawn();
    {
      std::lock_guard lock(mu_);
      if (pid > 0) {
        pid_ = pid;
        ++starts_;
        started_at_ = Clock::now();
        if (stopping_) ::kill(pid, SIGTERM);  // Stop came while it was being started
      } else {
        ++starts_;  // counted, so that Start sees a start that failed
      }
    }
    cv_.notify_all();
    if (pid > 0) {
      const int64_t oom_before = limiter_.OomKills();
      siginfo_t info{};
      while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0 &&
             errno == EINTR) {
      }
      Clock::time_point started;
      {
        std::lock_guard lock(mu_);
        pid_ = -1;  // before it is reaped: a pid being reaped is never signalled again
        started = started_at_;
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
      cv_.notify_all();
      {
        std::lock_guard lock(mu_);
        if (stopping_) return;
      }
      if (Clock::now() - started >= options_.healthy_after) backoff = options_.initial_backoff;
      const bool oom = limiter_.OomKills() > oom_before;
      spdlog::warn(
          "up: the relay (pid {}) {}{}; open relay sessions through it ended; starting it again in "
          "{} ms",
          pid, Describe(status),
          oom ? " after the kernel's OOM killer ended it at its memory limit of " +
                    Mib(limiter_.limit().bytes)
              : std::string(),
          backoff.count());
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, backoff, [this] { return stopping_; })) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

void RelayProcess::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    if (pid_ > 0) ::kill(pid_, SIGTERM);  // it ends its relay sessions and reports them
  }
  cv_.notify_all();
  {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, options_.stop_timeout, [this] { return pid_ < 0; }) && pid_ > 0) {
      spdlog::warn("up: the relay (pid {}) did not stop within {} ms; killing it", pid_,
                   options_.stop_timeout.count());
      ::kill(pid_, SIGKILL);
    }
  }
  if (supervisor_.joinable()) supervisor_.join();
  limiter_.Remove();
}

pid_t RelayProcess::pid() const {
  std::lock_guard lock(mu_);
  return pid_;
}

int RelayProcess::starts() const {
  std::lock_guard lock(mu_);
  return starts_;
}

ChildMemoryLimit RelayProcess::memory_limit() const {
  std::lock_guard lock(mu_);
  return applied_;
}

bool RelayProcess::WaitUntilListening(int n, std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(20));
      if (starts_ < n || pid_ < 0) continue;
    }
    if (IsListening(options_.listen_address, port_)) return true;
  }
  return false;
}

}  // namespace gpuwerk::app
