#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/child_memory_limit.h"
#include "core/error.h"

namespace gpuwerk::app {

/// How RelayProcess runs the relay.
struct RelayProcessOptions {
  /// The gpuwerk binary to run as `PROGRAM relay …`; /proc/self/exe under `gpuwerk up`.
  std::filesystem::path program = "/proc/self/exe";
  /// The control plane's base URL: `http://` to loopback (as `up`'s own server is reached) or
  /// `https://`; the relay refuses any other (protocol::CheckCredentialUrl).
  std::string server_url;
  /// The relay's credential ("gwr_…", access::RelayCredentials::IssueLocal): handed to the child
  /// in its environment (GPUWERK_RELAY_TOKEN), never on its command line.
  std::string credential;
  std::string listen_address = "127.0.0.1";  ///< numeric IPv4 or IPv6
  uint16_t listen_port = 2222;  ///< 0: a free port, chosen once at Start and kept for restarts
  std::filesystem::path host_key_path;   ///< the relay's SSH host key (created once, 0600)
  std::filesystem::path relay_key_path;  ///< the key the relay logs in to instances with
  /// The relay CA's key (created once, 0600), which signs the relay's certificate for each
  /// instance (docs/ssh.md "Upstream: the relay credential").
  std::filesystem::path relay_ca_path;
  /// The TCP balancers whose PROXY protocol header the relay believes: one
  /// `--relay-trusted-proxies` each (relay::RelayOptions::trusted_proxies).
  std::vector<std::string> trusted_proxies;
  std::string log_level = "info";  ///< the child's --log-level
  /// The child's memory limit, bytes (ChildMemoryLimiter: a cgroup of its own, else RLIMIT_AS).
  int64_t memory_limit_bytes = int64_t{2048} << 20;
  /// The cgroup group's name; "" for "gpuwerk-relay-<pid of this process>".
  std::string cgroup_name;
  /// Back-off between restarts: doubles from `initial_backoff` to `max_backoff` while the relay
  /// keeps dying, and starts over once a child ran for `healthy_after`.
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30'000};
  std::chrono::milliseconds healthy_after{60'000};
  /// How long Start waits for the first child to listen.
  std::chrono::milliseconds start_timeout{30'000};
  /// How long Stop waits after SIGTERM (the relay ends its relay sessions and sends their last
  /// reports, up to 5 s) before SIGKILL.
  std::chrono::milliseconds stop_timeout{10'000};
};

/// `gpuwerk up`'s SSH relay in a process of its own (issue 12 finding 3: a relay failure never
/// takes the control plane with it; docs/ssh.md "Running it"): `PROGRAM relay --server URL
/// --listen ADDR:PORT --host-key F --relay-key F --relay-ca F --log-level L`, with the credential
/// in its environment, talking to the server over HTTP like any remote relay (the same authorize,
/// re-check, watch and report routes), under a memory limit (ChildMemoryLimiter), and started
/// again when it dies.
///
/// The child runs in a process group of its own (Ctrl-C reaches `up`, which stops it in order),
/// with PR_SET_PDEATHSIG SIGKILL (it never outlives `up`, even one killed with SIGKILL), stdin
/// from /dev/null, stdout and stderr shared with `up` (its log lines appear in `up`'s), no other
/// file descriptor, an empty signal mask. It waits before exec until its limit is set, so nothing
/// it allocates escapes it. A child that exits is reaped and started again after a back-off
/// (RelayProcessOptions), logged with its exit status and, when the kernel's OOM killer ended
/// it in its cgroup, that it went past its memory limit.
///
/// Threading: one supervisor thread between Start and Stop (it forks each child and waits for
/// it); the accessors may be called from any thread.
class RelayProcess {
 public:
  /// Loads (or creates) the relay CA to learn its public line and makes a probe certificate of it
  /// (relay::MakeProbeCertificate) for the agent, chooses the port, prepares the memory limit,
  /// starts the first child and waits until it listens. Errors: kInvalidArgument
  /// invalid_ssh_listen (not a numeric address); kFailedPrecondition relay_server_url (a
  /// server URL the relay refuses: http:// to a non-loopback address); kUnavailable listen_failed
  /// (the address cannot be bound: in use, or not this machine's), relay_not_started (the child
  /// exited or did not listen within start_timeout; its log lines say why); the relay CA's errors
  /// (relay::LoadOrCreateEd25519Key; relay::MakeProbeCertificate's certificate_signing_failed).
  static core::Result<std::unique_ptr<RelayProcess>> Start(RelayProcessOptions options);
  /// Stop().
  ~RelayProcess();
  RelayProcess(const RelayProcess&) = delete;
  RelayProcess& operator=(const RelayProcess&) = delete;

  /// Sends the child SIGTERM, waits up to stop_timeout (then SIGKILL), starts no other, removes
  /// the cgroup group. Idempotent.
  void Stop();

  /// The port the relay listens on (the chosen one when listen_port was 0).
  uint16_t port() const { return port_; }
  /// The relay CA's public line ("ssh-ed25519 AAAA… gpuwerk-relay-ca\n") and a probe certificate
  /// of it (one line), for the agent, as relay::Relay gives them (the child loads the same CA).
  const std::string& relay_ca_public_line() const { return relay_ca_public_line_; }
  const std::string& relay_probe_certificate() const { return relay_probe_certificate_; }
  /// The running child's pid; -1 between a death and the next start.
  pid_t pid() const;
  /// How many children were started so far (1 after Start).
  int starts() const;
  /// What limits the memory of the running (last started) child.
  ChildMemoryLimit memory_limit() const;
  /// Waits until the `n`th child runs and listens; false when `timeout` passed first (tests).
  bool WaitUntilListening(int n, std::chrono::milliseconds timeout) const;

 private:
  explicit RelayProcess(RelayProcessOptions options);
  /// Forks and execs one child under the limit; its pid, or -1 (logged).
  pid_t Spawn();
  void Supervise();

  RelayProcessOptions options_;
  uint16_t port_ = 0;
  std::string relay_ca_public_line_;
  std::string relay_probe_certificate_;
  ChildMemoryLimiter limiter_;
  std::thread supervisor_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stopping_ = false;
  bool stopped_ = false;
  pid_t pid_ = -1;  ///< the child, until it is reaped (so a signal never reaches a reused pid)
  int starts_ = 0;
  ChildMemoryLimit applied_;
  std::chrono::steady_clock::time_point started_at_;
};

}  // namespace gpuwerk::app
