#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "core/access_change_feed.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/ip_networks.h"
#include "relay/relay_authorizer.h"
#include "relay/relay_session_log.h"

namespace gpuwerk::relay {

/// How a Relay listens, whom it lets in, and its limits.
struct RelayOptions {
  std::string listen_address = "127.0.0.1";  ///< numeric IPv4 or IPv6 address
  uint16_t listen_port = 2222;               ///< 0: pick a free port (see Relay::port())
  std::filesystem::path host_key_path;       ///< the relay's SSH host key (created once)
  /// The relay key (created once, 0600): the key the relay's login certificates certify; it
  /// logs in upstream only together with a certificate (docs/ssh.md "Upstream: the relay
  /// credential").
  std::filesystem::path relay_key_path;
  /// The relay CA's private key (ed25519, created once with mode 0600 like the keys above, never
  /// regenerated): it signs one short-lived OpenSSH user certificate per instance (principal
  /// `gpuwerk-instance-<instance id>`; RelayCertificates). Agents put its public line
  /// (relay_ca_public_line) into each container's authorized_keys as a `cert-authority` line for
  /// that instance's principal. Empty: `relay_ca` in relay_key_path's directory.
  std::filesystem::path relay_ca_path;
  /// How long each login certificate is valid after it is made, and how far back its validity
  /// starts (for a host whose clock runs a little behind). A certificate is reused for an
  /// instance until a minute before its end.
  std::chrono::seconds certificate_lifetime{300};
  std::chrono::seconds certificate_backdate{60};
  /// Dates the login certificates; null: the system clock. Tests set a FakeClock (an expired
  /// certificate). Must outlive the Relay.
  const core::Clock* certificate_clock = nullptr;

  /// From TCP accept to the client's identification string ("SSH-2.0-…", RFC 4253 §4.2), which
  /// every client sends at once: a connection that sends none is dropped (issue 12 finding 4).
  std::chrono::milliseconds banner_timeout{5'000};
  /// From TCP accept to the end of key exchange (RFC 4253 §7); a client that stalls is dropped.
  std::chrono::milliseconds handshake_timeout{10'000};
  /// From TCP accept to a successful login (like sshd's LoginGraceTime).
  std::chrono::milliseconds login_grace{30'000};
  /// Connecting and authenticating to the instance's sshd.
  std::chrono::milliseconds upstream_timeout{10'000};

  // Re-checks of open relay sessions (docs/ssh.md "Revocation"; issue 12 finding 6). They run
  // on the relay's re-check thread, never on a relay session's own thread: a slow answer never
  // holds up data.

  /// The backstop: every this often, all open relay sessions go to the authorizer in one batch
  /// (RelayAuthorizer::Recheck); each refused, or sent elsewhere, ends. Access changes the
  /// server pushes (RecheckRelaySessions) are checked at once, without waiting for it. Zero:
  /// never (pushed changes only).
  std::chrono::milliseconds recheck_interval{15'000};
  /// After a failed re-check (no answer, a 5xx, an answer not understood), the next try comes
  /// this much later instead of a whole recheck_interval.
  std::chrono::milliseconds recheck_retry_interval{2'000};
  /// Failed re-checks in a row after which every open relay session ends (fail closed), telling
  /// the person that their access cannot be confirmed. A refused relay credential (401/403)
  /// ends them all at the first. With the authorizer's timeout T, relay sessions end at most
  /// recheck_interval + max_failed_rechecks × T + (max_failed_rechecks − 1) ×
  /// recheck_retry_interval after the control plane stops answering (sooner when the relay's
  /// watch stream notices, which asks at once: RecheckAllRelaySessions). At least 1.
  int max_failed_rechecks = 3;

  // Behind a TCP balancer (docs/ssh.md "Behind a TCP balancer"; issue 12 finding 8).

  /// The TCP balancers (IPv4/IPv6 networks) in front of the relay that send the PROXY protocol
  /// header (version 1 or 2, ParseProxyHeader) on each connection they pass on. A connection
  /// from one of them must start with a header, and the client address it names replaces the
  /// balancer's for everything: admission and penalties, the relay session's source address
  /// (RelaySessionRecord, RelayRefusalRecord, AuthorizeRequest) and log lines; a LOCAL or
  /// UNKNOWN header (the balancer's health check) keeps the balancer's. From anyone else a
  /// header is not believed: it is a bad SSH identification string and the connection closes.
  /// Empty (the default): no header is read from anyone.
  core::IpNetworks trusted_proxies;
  /// From TCP accept to the end of a trusted balancer's header (which it sends at once); a
  /// connection that has not sent a whole, valid header by then is closed. The headers are read
  /// by the accept thread without blocking, so a slow one holds up nobody.
  std::chrono::milliseconds proxy_header_timeout{3'000};

  // Admission (docs/ssh.md "Limits"; issue 12 finding 4). A "source" is the client address's
  // IPv4 /24 or IPv6 /64 (one attacker usually holds a whole one; one person rarely does).

  int max_connections = 1000;  ///< open TCP connections, logged in or not, all together
  /// Connections from one source that have not logged in yet; more are closed at accept. Once a
  /// connection has logged in it counts for its person instead (max_sessions_per_person), so an
  /// office behind one NAT address can hold many relay sessions.
  int max_unauthenticated_per_source = 20;
  /// Like sshd's `MaxStartups begin:rate:full`: with `begin` or more connections (from all
  /// sources) not logged in yet, a new connection is closed at accept with probability `rate`%,
  /// rising linearly to 100% at `full`.
  int max_startups_begin = 100;
  int max_startups_rate = 30;
  int max_startups_full = 300;
  /// Relay sessions (logged-in connections) one person holds at once; a login past it is refused
  /// with the code `too_many_sessions`.
  int max_sessions_per_person = 50;
  int max_auth_tries = 6;  ///< failed authentication requests per connection
  /// Failed authentications from one source within `auth_failure_window` after which new
  /// connections from it are dropped at accept until the window has passed.
  int max_auth_failures_per_source = 30;
  std::chrono::seconds auth_failure_window{60};
  /// Penalties per source that outlast a connection (as OpenSSH 9.8's `PerSourcePenalties`):
  /// each connection from a source that ends without a login because it ran out of time (no
  /// identification string within banner_timeout, no key exchange within handshake_timeout, no
  /// login within login_grace, or closed silent to make room, below) adds `penalty_timeout` to
  /// the source's penalty; once the penalty left reaches `penalty_min`, new connections from the
  /// source are closed at accept until it has run out; it never exceeds `penalty_max`.
  /// 0 s penalty_timeout: no penalties.
  std::chrono::seconds penalty_timeout{10};
  std::chrono::seconds penalty_min{15};
  std::chrono::seconds penalty_max{600};
  /// When the random early drop (max_startups) would close a new connection, the relay instead
  /// closes the connection that has waited longest without sending its identification string,
  /// if it has waited at least this long, and admits the new one: every client sends that
  /// string at once (RFC 4253 §4.2), so only a silent flood loses its places, and a login
  /// always finds room. Zero: never (plain MaxStartups).
  std::chrono::milliseconds silent_eviction_after{1'000};

  // What one authenticated connection may make the relay hold (docs/ssh.md "Limits"; issue 12
  // finding 3). Each limit bounds memory that the client, or the instance's sshd (which the
  // tenant controls), could otherwise grow without end.

  /// Channels one connection holds at once, whoever opened them (session and direct-tcpip from
  /// the client; forwarded-tcpip and agent channels from the instance), counting those whose
  /// close the peer has not confirmed yet. Further opens are refused with
  /// SSH_OPEN_ADMINISTRATIVELY_PROHIBITED (RFC 4254 §5.1). The instance's sshd allows 10 session
  /// channels (`MaxSessions`); the rest leaves room for `-L`/`-D` tunnels.
  int max_channels_per_connection = 16;
  /// Channel requests (pty, env, exec, …, signals) queued on one channel while the relay waits
  /// for the instance's answer to an earlier one. One more ends the connection: answering it out
  /// of turn would break RFC 4254 §5.4's order. OpenSSH sends one per `SendEnv` variable, plus
  /// pty, agent and the command.
  int max_queued_requests_per_channel = 32;
  /// `tcpip-forward` / `cancel-tcpip-forward` requests waiting for the instance's answer (RFC
  /// 4254 §7.1). One more ends the connection (global replies are ordered too, §4).
  int max_pending_global_requests = 8;
  /// Bytes one channel may hold in libssh for one direction (and stream) that the relay has not
  /// taken yet. A peer that keeps to the window the relay granted never holds more than that
  /// window (1,280,000 bytes with libssh 0.10, 2 MiB from 0.11); libssh 0.10 buffers whatever a
  /// peer sends beyond it (up to 256 MiB a channel), so past this limit the connection ends with
  /// "… sent more than its channel window allows". 0: that window plus one maximal packet
  /// (256 KiB), i.e. 1,542,144 bytes with libssh 0.10.
  size_t max_channel_buffer_bytes = 0;
};

/// Counts of what the relay holds now (for /metrics and tests).
struct RelayStats {
  int open_connections = 0;     ///< TCP connections being served, authenticated or not
  int open_relay_sessions = 0;  ///< authenticated and connected upstream
  /// Connections closed at accept by an admission limit since the relay started.
  uint64_t dropped_at_accept = 0;
  /// Connections from a trusted balancer closed because their PROXY protocol header was
  /// malformed, oversized, late or missing, since the relay started.
  uint64_t bad_proxy_headers = 0;
  /// Connections that sent nothing, closed to make room for a new one (silent_eviction_after).
  uint64_t evicted_silent = 0;
  size_t penalized_sources = 0;  ///< sources whose new connections are closed at accept now
  /// RelayAuthorizer::Recheck calls since the relay started, and how many of them failed.
  uint64_t recheck_calls = 0;
  uint64_t failed_rechecks = 0;
  /// Failed re-checks since the last one that succeeded (max_failed_rechecks ends all).
  int failed_rechecks_in_a_row = 0;
  /// Relay sessions a re-check ended (refused, or failed closed) since the relay started.
  uint64_t ended_by_recheck = 0;
};

/// The SSH front door (DESIGN.md; docs/ssh.md): an SSH server (libssh 0.10) that takes
/// public-key logins only, asks the RelayAuthorizer where each goes, logs in to that instance's
/// sshd with the relay key and a certificate valid for that instance alone, and forwards session
/// channels (pty, env, shell, exec, subsystems such as sftp, window changes, signals, exit status
/// and exit signal, EOF in each direction; RFC 4254 §6) and direct-tcpip channels (`ssh -L`, `-W`;
/// RFC 4254 §7.2).
///
/// Threading: one accept thread, and one thread per TCP connection that runs both SSH sessions
/// (client side and upstream) on one ssh_event. A slow or stalled client blocks only its own
/// thread. The public methods are thread-safe.
class Relay {
 public:
  /// Loads (or creates, once) the host key, the relay key and the relay CA, makes the probe
  /// certificate (running `ssh-keygen`: SignUserCertificate), binds the listening socket and
  /// starts accepting. `authorizer` and `log` must outlive the Relay.
  /// Errors: those of LoadOrCreateEd25519Key; kUnavailable `certificate_signing_failed` when
  /// ssh-keygen cannot sign (not installed: openssh-client); kUnavailable `listen_failed` when the
  /// address cannot be bound (the message names it); kInvalidArgument `invalid_listen_address`.
  static core::Result<std::unique_ptr<Relay>> Start(RelayOptions options,
                                                    RelayAuthorizer& authorizer,
                                                    RelaySessionLog& log);

  /// Stops accepting, ends every connection (their relay sessions end with "relay stopping") and
  /// joins all threads. Idempotent; the destructor calls it.
  void Stop();
  ~Relay();

  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  /// The bound TCP port (useful with listen_port 0).
  uint16_t port() const;
  /// The host key's public line ("ssh-ed25519 AAAA… gpuwerk-relay-host\n") for known_hosts.
  const std::string& host_key_public_line() const;
  /// The relay CA's public line ("ssh-ed25519 AAAA… gpuwerk-relay-ca\n"): what every host agent
  /// is given (`gpuwerk agent --relay-ca`) to write, per container, the line
  /// `cert-authority,principals="gpuwerk-instance-<id>" ssh-ed25519 AAAA… gpuwerk-relay-ca`.
  const std::string& relay_ca_public_line() const;
  /// A probe certificate of the relay CA (MakeProbeCertificate, made at Start; one line, no line
  /// end): what host agents offer to check that sshd still takes the CA's certificates
  /// (`gpuwerk agent --relay-ca-probe`). It cannot log in: its key's private half is gone.
  const std::string& relay_probe_certificate() const;

  /// Ends, within a second, every open relay session to `instance_id` (the instance was deleted or
  /// is being re-created). The client is told why on its open channels' stderr. Returns how many
  /// were asked to close. New logins are the authorizer's business: it must refuse them first.
  int CloseRelaySessionsFor(const std::string& instance_id, const std::string& reason = "");
  /// The same for every relay session of one person (their access ended: case C09).
  int CloseRelaySessionsForPerson(const std::string& person_id, const std::string& reason = "");

  /// Asks the authorizer again, at once and on the re-check thread, about every open relay
  /// session that `change` names (by instance, by person, or by the key it logged in with); those
  /// refused end (docs/ssh.md "Revocation": the push path). Returns how many were queued for the
  /// re-check. Thread-safe, never blocks on the authorizer.
  int RecheckRelaySessions(const core::AccessChange& change);
  /// Asks again about every open relay session at once (e.g. the relay's watch stream broke:
  /// the control plane may be gone, or the relay's credential revoked). Thread-safe.
  void RecheckAllRelaySessions();

  RelayStats Stats() const;

 private:
  struct Impl;
  explicit Relay(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuwerk::relay
