#include "relay/relay.h"

#include <arpa/inet.h>
#include <libssh/libssh.h>
#include <libssh/server.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "core/random.h"
#include "core/strings.h"
#include "relay/internal/relay_connection.h"
#include "relay/internal/source_limiter.h"
#include "relay/internal/ssh_handles.h"
#include "relay/proxy_header.h"
#include "relay/relay_certificates.h"
#include "relay/ssh_key_file.h"

namespace gpuwerk::relay {

using core::ErrorCode;
using core::Fail;

struct Relay::Impl {
  Impl(RelayOptions o, RelayAuthorizer& a, RelaySessionLog& l)
      : options(std::move(o)), authorizer(a), log(l), limiter(AdmissionLimitsOf(options)) {}

  static internal::AdmissionLimits AdmissionLimitsOf(const RelayOptions& o) {
    internal::AdmissionLimits l;
    l.max_total = o.max_connections;
    l.max_unauthenticated_per_source = o.max_unauthenticated_per_source;
    l.startups_begin = o.max_startups_begin;
    l.startups_rate = o.max_startups_rate;
    l.startups_full = o.max_startups_full;
    l.max_failures_per_source = o.max_auth_failures_per_source;
    l.failure_window = o.auth_failure_window;
    l.max_sessions_per_person = o.max_sessions_per_person;
    l.penalty_timeout = o.penalty_timeout;
    l.penalty_min = o.penalty_min;
    l.penalty_max = o.penalty_max;
    return l;
  }

  RelayOptions options;
  RelayAuthorizer& authorizer;
  RelaySessionLog& log;
  internal::SourceLimiter limiter;
  SshKeyFile host_key;
  SshKeyFile relay_key;
  SshKeyFile relay_ca;
  std::string probe_certificate;
  std::unique_ptr<RelayCertificates> certificates;
  int listen_fd = -1;
  int stop_fd = -1;  // eventfd: wakes the accept loop
  uint16_t port = 0;
  internal::SshBindPtr bind;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> dropped{0};            ///< connections closed at accept by a limit
  std::atomic<uint64_t> evicted{0};            ///< silent connections closed to make room
  std::atomic<uint64_t> bad_proxy_headers{0};  ///< RelayStats::bad_proxy_headers
  core::SodiumRng rng;                         ///< relay session ids (RelaySessionRecord::id)

  struct Entry {
    std::shared_ptr<internal::ConnectionControl> control;
    std::thread thread;
  };
  mutable std::mutex mu;
  std::map<uint64_t, Entry> connections;
  std::mutex stop_mu;
  bool stopped = false;

  // The re-check thread (docs/ssh.md "Revocation"): the backstop every recheck_interval, and
  // the relay sessions pushed access changes name, at once.
  std::thread recheck_thread;
  std::mutex recheck_mu;  ///< guards the fields below
  std::condition_variable recheck_cv;
  bool recheck_stop = false;
  bool recheck_all = false;                ///< every relay session, at once
  std::set<uint64_t> recheck_ids;          ///< these connections, at once
  std::atomic<uint64_t> recheck_calls{0};  ///< RelayAuthorizer::Recheck calls
  std::atomic<uint64_t> failed_rechecks{0};
  std::atomic<int> failed_in_a_row{0};
  std::atomic<uint64_t> ended_by_recheck{0};
  std::atomic<uint64_t> access_changes{0};  ///< RecheckRelaySessions calls (ConnectionContext)

  void RecheckLoop();
  /// One Recheck of `ids` (every authenticated connection when `all`); false when it failed.
  bool RecheckOnce(bool all, const std::set<uint64_t>& ids);
  /// Asks every authenticated connection to end with `reason`; how many.
  int CloseAllAuthenticated(const std::string& reason);

  /// A connection from a trusted balancer whose PROXY protocol header is still being read (by
  /// the accept thread alone, without blocking).
  struct PendingHeader {
    int fd = -1;
    std::string peer;   ///< the balancer
    std::string bytes;  ///< of the header, so far
    std::chrono::steady_clock::time_point deadline;
  };
  std::vector<PendingHeader> pending_headers;  ///< the accept thread's alone

  void AcceptLoop();
  /// Reads what has arrived of `p`'s header without reading past its end. True when `p` is
  /// done: served (the header was whole) or closed (it was bad, or the balancer closed).
  bool ReadProxyHeader(PendingHeader& p);
  /// Closes a trusted balancer's connection whose header is bad, logging once a minute per
  /// balancer at most.
  void RefuseProxyHeader(PendingHeader& p, const std::string& why);
  void Reap(bool all);
  void Serve(int fd, std::string source);
  /// Asks the connection that has waited longest (at least silent_eviction_after) without
  /// sending its identification string to close, and adds to its source's penalty, to make
  /// room for a new connection from `source`. False when there is none, or when `source`'s
  /// prefix holds such a silent connection itself.
  bool EvictSilentConnection(const std::string& source);
  /// Logs a connection closed at accept, at most once per source prefix (or once for the random
  /// early drop) a minute, with the count since the last line.
  void LogDrop(const std::string& source, internal::SourceLimiter::Admission why);
  template <class Pred>
  int CloseWhere(Pred pred, const std::string& reason);
};

namespace {

std::string NumericAddress(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a6 = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      ::inet_ntop(AF_INET, &a6.s6_addr[12], buf, sizeof buf);
    } else {
      ::inet_ntop(AF_INET6, &a6, buf, sizeof buf);
    }
  }
  return buf;
}

}  // namespace

void Relay::Impl::Reap(bool all) {
  std::vector<Entry> done;
  {
    std::lock_guard lock(mu);
    for (auto it = connections.begin(); it != connections.end();) {
      if (all || it->second.control->finished) {
        done.push_back(std::move(it->second));
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& e : done) {
    if (e.thread.joinable()) e.thread.join();
    if (e.control->wake_fd >= 0) ::close(e.control->wake_fd);
  }
}

void Relay::Impl::LogDrop(const std::string& source, internal::SourceLimiter::Admission why) {
  using Admission = internal::SourceLimiter::Admission;
  const std::string prefix = internal::SourcePrefix(source);
  std::string what;
  switch (why) {
    case Admission::kTotalFull:
      what = std::to_string(options.max_connections) + " connections are open (max_connections)";
      break;
    case Admission::kSourceFull:
      what = std::to_string(options.max_unauthenticated_per_source) +
             " connections from it have not logged in yet (max_unauthenticated_per_source)";
      break;
    case Admission::kSourceFailures:
      what = "too many failed logins from it (max_auth_failures_per_source)";
      break;
    case Admission::kStartupsDrop:
      what = "random early drop: " + std::to_string(limiter.unauthenticated()) +
             " connections have not logged in yet (max_startups " +
             std::to_string(options.max_startups_begin) + ":" +
             std::to_string(options.max_startups_rate) + ":" +
             std::to_string(options.max_startups_full) + ")";
      break;
    case Admission::kSourcePenalized:
      what =
          "its connections keep running out of time before logging in (penalty_timeout, "
          "penalty_min)";
      break;
    case Admission::kAdmitted:
      return;
  }
  // One line per source and minute (the startups drop hits every source: one line for all).
  const std::string key = why == Admission::kStartupsDrop ? "(max_startups)" : prefix;
  if (auto n = limiter.RefusalToLog(key)) {
    spdlog::warn(
        "relay: closed {} connection{} from {} at accept: {} (one line a minute per source at "
        "most)",
        *n, *n == 1 ? "" : "s", why == Admission::kStartupsDrop ? "all sources" : prefix, what);
  }
}

bool Relay::Impl::EvictSilentConnection(const std::string& source) {
  if (options.silent_eviction_after.count() <= 0) return false;
  const auto now = std::chrono::steady_clock::now();
  const std::string prefix = internal::SourcePrefix(source);
  std::shared_ptr<internal::ConnectionControl> oldest;
  {
    std::lock_guard lock(mu);
    for (const auto& [id, e] : connections) {
      const auto& c = e.control;
      if (c->banner_received || c->close_requested || c->finished) continue;
      // A source that holds a silent connection itself takes nobody's place: a flood would
      // otherwise churn its own connections young, and a real client holds none.
      if (c->source_prefix == prefix) return false;
      if (now - c->accepted_at < options.silent_eviction_after) continue;
      if (!oldest || c->accepted_at < oldest->accepted_at) oldest = c;
    }
  }
  if (!oldest) return false;
  // Counted as a timeout: a connection silent this long under pressure is the flood's.
  limiter.RecordPreAuthTimeout(oldest->source_address, now);
  oldest->RequestClose("closed to make room: no SSH identification string");
  ++evicted;
  return true;
}

void Relay::Impl::Serve(int fd, std::string source) {
  if (const auto admission = limiter.TryAdmit(source);
      admission != internal::SourceLimiter::Admission::kAdmitted) {
    if (admission == internal::SourceLimiter::Admission::kStartupsDrop &&
        EvictSilentConnection(source)) {
      limiter.AdmitInPlaceOfSilent(source);
    } else {
      ++dropped;
      LogDrop(source, admission);
      ::close(fd);
      return;
    }
  }
  internal::SshSessionPtr session(ssh_new());
  if (session == nullptr || ssh_bind_accept_fd(bind.get(), session.get(), fd) != SSH_OK) {
    spdlog::error("relay: cannot set up an SSH session: {}",
                  session ? ssh_get_error(bind.get()) : "out of memory");
    session.reset();
    ::close(fd);
    limiter.Release(source, "");
    return;
  }
  int one = 1;  // small packets (window adjusts, keystrokes) must not wait for Nagle
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // A client whose network vanished (no FIN) is noticed after about two minutes, not hours.
  int idle = 60, interval = 15, count = 4;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  auto control = std::make_shared<internal::ConnectionControl>();
  control->id = next_id++;
  control->record_id = core::NewId(rng, "rls");
  control->source_address = source;
  control->source_prefix = internal::SourcePrefix(source);
  control->accepted_at = std::chrono::steady_clock::now();
  control->client_fd = fd;
  control->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  internal::ConnectionContext ctx;
  ctx.options = &options;
  ctx.authorizer = &authorizer;
  ctx.log = &log;
  ctx.relay_key_private = &relay_key.private_openssh;
  ctx.certificates = certificates.get();
  ctx.limiter = &limiter;
  ctx.access_changes = &access_changes;
  ctx.recheck = [this](uint64_t id) {
    {
      std::lock_guard lock(recheck_mu);
      recheck_ids.insert(id);
    }
    recheck_cv.notify_all();
  };
  std::lock_guard lock(mu);
  Entry& e = connections[control->id];
  e.control = control;
  e.thread = std::thread([this, session = std::move(session), ctx, control]() mutable {
    internal::RunConnection(std::move(session), ctx, *control);
    std::string person;
    if (control->authenticated) {
      std::lock_guard lock(control->mu);
      person = control->person_id;
    }
    limiter.Release(control->source_address, person);
    control->finished = true;
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_fd, &one, sizeof one);  // let the accept loop reap
  });
}

void Relay::Impl::RefuseProxyHeader(PendingHeader& p, const std::string& why) {
  ++bad_proxy_headers;
  if (auto n = limiter.RefusalToLog("(proxy) " + p.peer)) {
    spdlog::warn(
        "relay: closed {} connection{} from the trusted balancer {}: {} (one line a minute per "
        "balancer at most)",
        *n, *n == 1 ? "" : "s", p.peer, why);
  }
  ::close(p.fd);
  p.fd = -1;
}

bool Relay::Impl::ReadProxyHeader(PendingHeader& p) {
  char buf[4096];
  while (true) {
    const ProxyHeaderParse parse = ParseProxyHeader(p.bytes);
    if (parse.status == ProxyHeaderParse::Status::kInvalid) {
      RefuseProxyHeader(p, parse.error);
      return true;
    }
    if (parse.status == ProxyHeaderParse::Status::kComplete) {
      const ProxyHeader& h = parse.header;
      const std::string source = h.local ? p.peer : h.source_address;
      spdlog::debug("relay: the balancer {} passes on a connection from {} (PROXY v{}{})", p.peer,
                    source, h.version, h.local ? ", LOCAL" : "");
      const int fd = p.fd;
      p.fd = -1;
      Serve(fd, source);
      return true;
    }
    // Never past the header: the client's SSH bytes behind it stay in the socket for libssh.
    size_t want = std::min(parse.max_read, sizeof buf);
    if (parse.stop_after_newline) {
      const ssize_t peeked = ::recv(p.fd, buf, want, MSG_PEEK | MSG_DONTWAIT);
      if (peeked > 0) {
        const void* nl = std::memchr(buf, '\n', static_cast<size_t>(peeked));
        want = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - buf) + 1
                             : static_cast<size_t>(peeked);
      }
    }
    const ssize_t n = ::recv(p.fd, buf, want, MSG_DONTWAIT);
    if (n > 0) {
      p.bytes.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    RefuseProxyHeader(p, n == 0 ? "it closed before its PROXY protocol header was complete"
                                : std::string("reading its PROXY protocol header failed: ") +
                                      std::strerror(errno));
    return true;
  }
}

void Relay::Impl::AcceptLoop() {
  using Clock = std::chrono::steady_clock;
  std::vector<pollfd> fds;
  while (!stopping) {
    fds.assign({{listen_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}});
    auto next = Clock::now() + std::chrono::seconds(1);
    for (const PendingHeader& p : pending_headers) {
      fds.push_back({p.fd, POLLIN, 0});
      next = std::min(next, p.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now());
    int rc = ::poll(fds.data(), fds.size(),
                    static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 1000)));
    if (rc < 0 && errno != EINTR) {
      spdlog::error("relay: poll failed: {}", std::strerror(errno));
      break;
    }
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = ::read(stop_fd, &v, sizeof v);
    }
    Reap(false);
    if (stopping) break;
    // Balancers' headers: what arrived, then the deadlines.
    const auto now = Clock::now();
    for (size_t i = 0; i < pending_headers.size(); ++i) {
      PendingHeader& p = pending_headers[i];
      if (rc > 0 && fds[2 + i].revents != 0 && ReadProxyHeader(p)) continue;
      if (p.fd >= 0 && now >= p.deadline) {
        RefuseProxyHeader(p, "no whole PROXY protocol header within " +
                                 std::to_string(options.proxy_header_timeout.count()) +
                                 " ms (proxy_header_timeout)");
      }
    }
    std::erase_if(pending_headers, [](const PendingHeader& p) { return p.fd < 0; });
    if (fds[0].revents & POLLIN) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string peer = NumericAddress(ss);
      if (!options.trusted_proxies.Contains(peer)) {
        Serve(fd, std::move(peer));
        continue;
      }
      // A trusted balancer: its header first, read here as it arrives. Waiting headers count
      // towards max_connections (nothing else limits them: the balancer is one source).
      if (pending_headers.size() + static_cast<size_t>(limiter.open_total()) >=
          static_cast<size_t>(std::max(options.max_connections, 1))) {
        ++dropped;
        LogDrop(peer, internal::SourceLimiter::Admission::kTotalFull);
        ::close(fd);
        continue;
      }
      PendingHeader& p = pending_headers.emplace_back();
      p.fd = fd;
      p.peer = std::move(peer);
      p.deadline = Clock::now() + options.proxy_header_timeout;
      if (ReadProxyHeader(p)) pending_headers.pop_back();  // it may all be there already
    }
  }
  for (PendingHeader& p : pending_headers) ::close(p.fd);
  pending_headers.clear();
}

template <class Pred>
int Relay::Impl::CloseWhere(Pred pred, const std::string& reason) {
  int n = 0;
  std::lock_guard lock(mu);
  for (auto& [id, e] : connections) {
    bool match = false;
    {
      std::lock_guard l2(e.control->mu);
      match = e.control->authenticated && pred(*e.control);
    }
    if (match && !e.control->finished) {
      e.control->RequestClose(reason);
      ++n;
    }
  }
  return n;
}

core::Result<std::unique_ptr<Relay>> Relay::Start(RelayOptions options, RelayAuthorizer& authorizer,
                                                  RelaySessionLog& log) {
  core::InitCrypto();  // libsodium, for relay session ids; idempotent
  auto impl = std::make_unique<Impl>(std::move(options), authorizer, log);
  GPUWERK_ASSIGN_OR_RETURN(
      impl->host_key, LoadOrCreateEd25519Key(impl->options.host_key_path, "gpuwerk-relay-host"));
  GPUWERK_ASSIGN_OR_RETURN(impl->relay_key,
                           LoadOrCreateEd25519Key(impl->options.relay_key_path, "gpuwerk-relay"));
  if (impl->options.relay_ca_path.empty()) {
    impl->options.relay_ca_path = impl->options.relay_key_path.parent_path() / "relay_ca";
  }
  GPUWERK_ASSIGN_OR_RETURN(impl->relay_ca,
                           LoadOrCreateEd25519Key(impl->options.relay_ca_path, "gpuwerk-relay-ca"));
  // The login certificates come from ssh-keygen: a relay that cannot run it could log in
  // nowhere, so it does not start (the probe certificate tries it once).
  GPUWERK_ASSIGN_OR_RETURN(impl->probe_certificate,
                           MakeProbeCertificate(impl->options.relay_ca_path));
  impl->certificates = std::make_unique<RelayCertificates>(
      RelayCertificates::Options{.ca_key_path = impl->options.relay_ca_path,
                                 .relay_public_line = impl->relay_key.public_line,
                                 .lifetime = impl->options.certificate_lifetime,
                                 .backdate = impl->options.certificate_backdate,
                                 .clock = impl->options.certificate_clock});

  sockaddr_storage ss{};
  socklen_t len = 0;
  const std::string& addr = impl->options.listen_address;
  if (auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
      ::inet_pton(AF_INET, addr.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(impl->options.listen_port);
    len = sizeof(sockaddr_in);
  } else if (auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
             ::inet_pton(AF_INET6, addr.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(impl->options.listen_port);
    len = sizeof(sockaddr_in6);
  } else {
    return Fail(ErrorCode::kInvalidArgument, "invalid_listen_address",
                "the relay's listen address must be a numeric IP address, got \"" + addr + "\"");
  }
  const std::string where = addr + ":" + std::to_string(impl->options.listen_port);
  impl->listen_fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (impl->listen_fd < 0 || ::bind(impl->listen_fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::listen(impl->listen_fd, 128) != 0) {
    std::string err = std::strerror(errno);
    if (impl->listen_fd >= 0) ::close(impl->listen_fd);
    impl->listen_fd = -1;
    return Fail(ErrorCode::kUnavailable, "listen_failed",
                "the relay cannot listen on " + where + ": " + err);
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  impl->port = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in&>(bound).sin_port
                                                : reinterpret_cast<sockaddr_in6&>(bound).sin6_port);

  impl->bind.reset(ssh_bind_new());
  ssh_bind_options_set(impl->bind.get(), SSH_BIND_OPTIONS_HOSTKEY,
                       impl->options.host_key_path.c_str());
  // "SSH-2.0-gpuwerk" rather than the library and its version (RFC 4253 §4.2 softwareversion).
  ssh_bind_options_set(impl->bind.get(), SSH_BIND_OPTIONS_BANNER, "gpuwerk");
  impl->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  spdlog::info("relay: listening on {}:{}, host key {}, relay CA {}", addr, impl->port,
               impl->host_key.fingerprint, impl->relay_ca.fingerprint);
  Impl* raw = impl.get();
  impl->accept_thread = std::thread([raw] { raw->AcceptLoop(); });
  impl->recheck_thread = std::thread([raw] { raw->RecheckLoop(); });
  return std::unique_ptr<Relay>(new Relay(std::move(impl)));
}

Relay::Relay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Relay::~Relay() { Stop(); }

void Relay::Stop() {
  std::lock_guard stop_lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping = true;
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(impl_->stop_fd, &one, sizeof one);
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  {
    std::lock_guard lock(impl_->recheck_mu);
    impl_->recheck_stop = true;
  }
  impl_->recheck_cv.notify_all();
  if (impl_->recheck_thread.joinable()) impl_->recheck_thread.join();
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [id, e] : impl_->connections) {
      e.control->RequestClose("relay stopping");
      if (!e.control->authenticated) e.control->ShutdownSocket();
    }
  }
  impl_->Reap(true);
  impl_->bind.reset();
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  impl_->listen_fd = -1;
  if (impl_->stop_fd >= 0) ::close(impl_->stop_fd);
  impl_->stop_fd = -1;
}

uint16_t Relay::port() const { return impl_->port; }
const std::string& Relay::host_key_public_line() const { return impl_->host_key.public_line; }
const std::string& Relay::relay_ca_public_line() const { return impl_->relay_ca.public_line; }
const std::string& Relay::relay_probe_certificate() const { return impl_->probe_certificate; }

int Relay::CloseRelaySessionsFor(const std::string& instance_id, const std::string& reason) {
  return impl_->CloseWhere(
      [&](const internal::ConnectionControl& c) { return c.instance_id == instance_id; },
      reason.empty() ? "instance " + instance_id + " is no longer available to you" : reason);
}

int Relay::CloseRelaySessionsForPerson(const std::string& person_id, const std::string& reason) {
  return impl_->CloseWhere(
      [&](const internal::ConnectionControl& c) { return c.person_id == person_id; },
      reason.empty() ? "your access to this instance has ended" : reason);
}

int Relay::RecheckRelaySessions(const core::AccessChange& change) {
  auto has = [](const std::vector<std::string>& list, const std::string& v) {
    return !v.empty() && std::find(list.begin(), list.end(), v) != list.end();
  };
  ++impl_->access_changes;  // before the scan: a login deciding now asks again (client_login)
  std::set<uint64_t> ids;
  {
    std::lock_guard lock(impl_->mu);
    for (auto& [id, e] : impl_->connections) {
      if (!e.control->authenticated || e.control->finished) continue;
      std::lock_guard l2(e.control->mu);
      if (has(change.instance_ids, e.control->instance_id) ||
          has(change.person_ids, e.control->person_id) ||
          has(change.key_fingerprints, e.control->request.key_fingerprint)) {
        ids.insert(id);
      }
    }
  }
  if (ids.empty()) return 0;
  {
    std::lock_guard lock(impl_->recheck_mu);
    impl_->recheck_ids.insert(ids.begin(), ids.end());
  }
  impl_->recheck_cv.notify_all();
  return static_cast<int>(ids.size());
}

void Relay::RecheckAllRelaySessions() {
  {
    std::lock_guard lock(impl_->recheck_mu);
    impl_->recheck_all = true;
  }
  impl_->recheck_cv.notify_all();
}

int Relay::Impl::CloseAllAuthenticated(const std::string& reason) {
  const int n = CloseWhere([](const internal::ConnectionControl&) { return true; }, reason);
  ended_by_recheck += static_cast<uint64_t>(n);
  return n;
}

bool Relay::Impl::RecheckOnce(bool all, const std::set<uint64_t>& ids) {
  struct Asked {
    std::shared_ptr<internal::ConnectionControl> control;
    std::string hostname;
  };
  std::vector<Asked> asked;
  std::vector<RecheckItem> items;
  {
    std::lock_guard lock(mu);
    for (auto& [id, e] : connections) {
      if (!e.control->authenticated || e.control->finished || e.control->close_requested) continue;
      if (!all && !ids.contains(id)) continue;
      std::lock_guard l2(e.control->mu);
      items.push_back({.relay_session_id = e.control->record_id,
                       .request = e.control->request,
                       .instance_id = e.control->instance_id,
                       .login = e.control->login});
      asked.push_back({e.control, e.control->hostname});
    }
  }
  if (items.empty()) return true;
  ++recheck_calls;
  auto verdicts = authorizer.Recheck(items);  // may take up to the authorizer's timeout
  if (!verdicts) {
    ++failed_rechecks;
    const auto& err = verdicts.error();
    if (err.code == ErrorCode::kUnauthenticated || err.code == ErrorCode::kPermissionDenied) {
      failed_in_a_row = 0;
      const int n = CloseAllAuthenticated(
          "the relay can no longer confirm anyone's access (its credential was refused), so "
          "open connections are closed. Try again in a few minutes; if it keeps failing, tell "
          "the operator of this service");
      spdlog::error(
          "relay: the control plane refused the relay's credential ({}); ended all {} open "
          "relay session(s) (fail closed). Give the relay a valid relay credential.",
          core::BoundedPrintable(err.message), n);
      return true;  // not a failure to count: the answer was clear
    }
    const int in_a_row = ++failed_in_a_row;
    spdlog::warn("relay: re-check {} of {} failed: {}", in_a_row, options.max_failed_rechecks,
                 core::BoundedPrintable(err.message));
    if (in_a_row >= std::max(options.max_failed_rechecks, 1)) {
      failed_in_a_row = 0;
      const int n = CloseAllAuthenticated(
          "the relay cannot reach the control plane to confirm your access, so this connection "
          "is closed. Try again in a few minutes");
      spdlog::error(
          "relay: {} re-checks in a row failed; ended all {} open relay session(s) (fail "
          "closed, max_failed_rechecks)",
          in_a_row, n);
    }
    return false;
  }
  failed_in_a_row = 0;
  if (verdicts->size() != items.size()) return false;  // the authorizer's contract: one each
  for (size_t i = 0; i < items.size(); ++i) {
    const RecheckVerdict& v = (*verdicts)[i];
    if (v.allowed) continue;
    ++ended_by_recheck;
    const std::string reason = !v.message.empty()
                                   ? core::BoundedPrintable(v.message)
                                   : "your access to instance " + asked[i].hostname + " has ended";
    spdlog::info("relay: relay session {} ({}) refused at re-check; ending it",
                 asked[i].control->id, asked[i].control->record_id);
    asked[i].control->RequestClose(reason);
  }
  return true;
}

void Relay::Impl::RecheckLoop() {
  using Clock = std::chrono::steady_clock;
  const auto interval = options.recheck_interval;
  const auto far = Clock::now() + std::chrono::hours(24 * 365);
  auto next_full = interval.count() > 0 ? Clock::now() + interval : far;
  while (true) {
    bool all = false;
    std::set<uint64_t> ids;
    {
      std::unique_lock lock(recheck_mu);
      recheck_cv.wait_until(lock, next_full, [&] {
        return recheck_stop || recheck_all || !recheck_ids.empty() || Clock::now() >= next_full;
      });
      if (recheck_stop) return;
      all = recheck_all || Clock::now() >= next_full;
      recheck_all = false;
      ids.swap(recheck_ids);
    }
    const bool ok = RecheckOnce(all, ids);
    if (!ok) {
      // Try again soon, all of them: what failed may have included a pushed change.
      next_full =
          Clock::now() + std::max(options.recheck_retry_interval, std::chrono::milliseconds(1));
    } else if (all) {
      next_full = interval.count() > 0 ? Clock::now() + interval : far;
    }
  }
}

RelayStats Relay::Stats() const {
  RelayStats s;
  s.dropped_at_accept = impl_->dropped;
  s.evicted_silent = impl_->evicted;
  s.bad_proxy_headers = impl_->bad_proxy_headers;
  s.penalized_sources = impl_->limiter.penalized_sources();
  s.recheck_calls = impl_->recheck_calls;
  s.failed_rechecks = impl_->failed_rechecks;
  s.failed_rechecks_in_a_row = impl_->failed_in_a_row;
  s.ended_by_recheck = impl_->ended_by_recheck;
  std::lock_guard lock(impl_->mu);
  for (auto& [id, e] : impl_->connections) {
    if (e.control->finished) continue;
    ++s.open_connections;
    if (e.control->authenticated) ++s.open_relay_sessions;
  }
  return s;
}

}  // namespace gpuwerk::relay
