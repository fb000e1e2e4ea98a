#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>

namespace gpuwerk::relay::internal {

/// The key a client address is counted under (docs/ssh.md "Limits"): an IPv4 address's /24
/// ("192.0.2.0/24", also for an IPv4-mapped IPv6 address), an IPv6 address's /64
/// ("2001:db8:1:2::/64"); the text itself when it is neither. One person rarely holds a whole
/// /24 or /64, and an attacker usually does.
std::string SourcePrefix(const std::string& address);

/// The relay's admission limits (RelayOptions; docs/ssh.md "Limits").
struct AdmissionLimits {
  int max_total = 1000;                     ///< open TCP connections, all together
  int max_unauthenticated_per_source = 20;  ///< not yet logged in, per SourcePrefix
  /// Like sshd's MaxStartups begin:rate:full: with `begin` or more connections not yet logged
  /// in, a new one is dropped with probability `rate`% rising linearly to 100% at `full`.
  int startups_begin = 100;
  int startups_rate = 30;
  int startups_full = 300;
  int max_failures_per_source = 30;  ///< failed logins per SourcePrefix within the window
  std::chrono::seconds failure_window{60};
  int max_sessions_per_person = 50;  ///< logged-in connections of one person
  /// Penalties per source that outlast a connection, as OpenSSH's PerSourcePenalties (sshd_config
  /// (5), OpenSSH 9.8): each connection from a prefix that ended without a login because it ran
  /// out of time (no identification string, key exchange or login in time, or closed silent to
  /// make room) adds `penalty_timeout` seconds to the prefix's penalty; once the penalty left
  /// reaches `penalty_min`, new connections from the prefix are closed at accept until it has
  /// run out. It never exceeds `penalty_max`. 0 s `penalty_timeout`: no penalties.
  std::chrono::seconds penalty_timeout{10};
  std::chrono::seconds penalty_min{15};
  std::chrono::seconds penalty_max{600};
  /// Prefixes with a penalty remembered at once; past it, new prefixes get none (as OpenSSH's
  /// `overflow:permissive`), so memory stays bounded under a flood from everywhere.
  size_t max_penalized_sources = 65536;
};

/// Per-source and per-person admission for the relay: connections are counted from accept as
/// unauthenticated (per source prefix and in all, with sshd's random early drop), then, once
/// logged in, per person. Also counts failed logins per source prefix, and says when a refusal
/// is worth a log line (once per source prefix and interval). Thread-safe.
class SourceLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  /// Why a connection was or was not admitted.
  enum class Admission {
    kAdmitted,
    kTotalFull,        ///< max_total
    kSourceFull,       ///< max_unauthenticated_per_source
    kSourceFailures,   ///< max_failures_per_source within failure_window
    kStartupsDrop,     ///< the random early drop (startups_begin … startups_full)
    kSourcePenalized,  ///< the prefix's penalty (penalty_min … penalty_max) has not run out
  };

  /// `seed` feeds the random early drop's draws.
  explicit SourceLimiter(AdmissionLimits limits, uint64_t seed = std::random_device{}());

  /// A new connection from `address`; when admitted it counts as unauthenticated until
  /// TryAuthenticate, and must be given back with Release. `draw` (0–99) replaces the random
  /// draw of the early drop (tests).
  Admission TryAdmit(const std::string& address, Clock::time_point now = Clock::now(),
                     std::optional<int> draw = std::nullopt);
  /// Counts a connection from `address` that TryAdmit answered kStartupsDrop for, admitted
  /// after all because it takes the place of a connection the caller is closing (one that sent
  /// nothing: Relay's silent-connection eviction). Give it back with Release, as any other.
  void AdmitInPlaceOfSilent(const std::string& address);
  /// A connection from `address` ended without a login because it ran out of time (or was
  /// closed silent to make room): adds penalty_timeout to its prefix's penalty.
  void RecordPreAuthTimeout(const std::string& address, Clock::time_point now = Clock::now());
  /// Prefixes whose penalty has not run out (tests, stats).
  size_t penalized_sources(Clock::time_point now = Clock::now()) const;
  /// The connection from `address` logged in as `person`: from now on counted for the person
  /// (not as unauthenticated). False, with nothing changed, when the person already holds
  /// max_sessions_per_person.
  bool TryAuthenticate(const std::string& address, const std::string& person);
  /// Undoes TryAuthenticate (the login failed after all).
  void Unauthenticate(const std::string& address, const std::string& person);
  /// The connection ended; `person` is empty unless it had logged in.
  void Release(const std::string& address, const std::string& person);
  /// One failed login from `address` (counts towards max_failures_per_source).
  void RecordAuthFailure(const std::string& address, Clock::time_point now = Clock::now());

  /// A refusal under `key` (a source prefix, or any fixed key) happened: returns how many
  /// refusals under `key` to report in one log line when one is due (the first, then once per
  /// `interval`), or nothing when the line would repeat within the interval. Bounded memory.
  std::optional<uint64_t> RefusalToLog(const std::string& key, Clock::time_point now = Clock::now(),
                                       std::chrono::seconds interval = std::chrono::seconds(60));

  int open_total() const;
  int unauthenticated() const;
  int sessions_of(const std::string& person) const;
  size_t refusal_log_keys() const;  ///< RefusalToLog's bookkeeping (tests)
  const AdmissionLimits& limits() const { return limits_; }

 private:
  void Prune(const std::string& prefix, Clock::time_point now);
  void ReleaseUnauthenticated(const std::string& prefix);

  const AdmissionLimits limits_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  int total_ = 0;
  int unauthenticated_ = 0;
  std::map<std::string, int> unauthenticated_by_source_;
  std::map<std::string, int> sessions_by_person_;
  std::map<std::string, std::deque<Clock::time_point>> failures_;
  struct Penalty {
    Clock::time_point expiry;
    bool active = false;  ///< reached penalty_min; stays so until expiry
  };
  std::map<std::string, Penalty> penalties_;
  struct LogState {
    Clock::time_point logged_at;
    uint64_t since = 0;  ///< refusals since the last logged one
  };
  std::map<std::string, LogState> refusal_log_;
};

}  // namespace gpuwerk::relay::internal
