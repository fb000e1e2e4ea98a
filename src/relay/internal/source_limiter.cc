#include "relay/internal/source_limiter.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace gpuwerk::relay::internal {

namespace {

const std::string kOtherSources = "(other sources)";

std::string Ipv4Prefix(const unsigned char* a) {
  return std::to_string(a[0]) + "." + std::to_string(a[1]) + "." + std::to_string(a[2]) + ".0/24";
}

}  // namespace

std::string SourcePrefix(const std::string& address) {
  in_addr v4{};
  if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return Ipv4Prefix(reinterpret_cast<const unsigned char*>(&v4.s_addr));
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return Ipv4Prefix(&v6.s6_addr[12]);
    std::memset(&v6.s6_addr[8], 0, 8);
    char buf[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET6, &v6, buf, sizeof buf);
    return std::string(buf) + "/64";
  }
  return address;
}

SourceLimiter::SourceLimiter(AdmissionLimits limits, uint64_t seed)
    : limits_(std::move(limits)), rng_(seed) {}

void SourceLimiter::Prune(const std::string& prefix, Clock::time_point now) {
  auto it = failures_.find(prefix);
  if (it == failures_.end()) return;
  while (!it->second.empty() && now - it->second.front() >= limits_.failure_window) {
    it->second.pop_front();
  }
  if (it->second.empty()) failures_.erase(it);
}

SourceLimiter::Admission SourceLimiter::TryAdmit(const std::string& address, Clock::time_point now,
                                                 std::optional<int> draw) {
  const std::string prefix = SourcePrefix(address);
  std::lock_guard lock(mu_);
  if (total_ >= limits_.max_total) return Admission::kTotalFull;
  if (auto it = unauthenticated_by_source_.find(prefix);
      it != unauthenticated_by_source_.end() &&
      it->second >= limits_.max_unauthenticated_per_source) {
    return Admission::kSourceFull;
  }
  Prune(prefix, now);
  if (auto it = failures_.find(prefix);
      it != failures_.end() &&
      static_cast<int>(it->second.size()) >= limits_.max_failures_per_source) {
    return Admission::kSourceFailures;
  }
  if (auto it = penalties_.find(prefix); it != penalties_.end()) {
    if (it->second.expiry <= now) {
      penalties_.erase(it);
    } else if (it->second.active) {
      return Admission::kSourcePenalized;
    }
  }
  // sshd's drop_connection (MaxStartups): certain at `full`, else rate% at `begin` rising
  // linearly to 100% at `full`.
  if (unauthenticated_ >= limits_.startups_begin) {
    if (unauthenticated_ >= limits_.startups_full) return Admission::kStartupsDrop;
    const int span = std::max(limits_.startups_full - limits_.startups_begin, 1);
    const int p = limits_.startups_rate + (100 - limits_.startups_rate) *
                                              (unauthenticated_ - limits_.startups_begin) / span;
    const int r = draw ? *draw : static_cast<int>(rng_() % 100);
    if (r < p) return Admission::kStartupsDrop;
  }
  ++total_;
  ++unauthenticated_;
  ++unauthenticated_by_source_[prefix];
  return Admission::kAdmitted;
}

void SourceLimiter::AdmitInPlaceOfSilent(const std::string& address) {
  const std::string prefix = SourcePrefix(address);
  std::lock_guard lock(mu_);
  ++total_;
  ++unauthenticated_;
  ++unauthenticated_by_source_[prefix];
}

void SourceLimiter::RecordPreAuthTimeout(const std::string& address, Clock::time_point now) {
  if (limits_.penalty_timeout.count() <= 0) return;
  const std::string prefix = SourcePrefix(address);
  std::lock_guard lock(mu_);
  auto it = penalties_.find(prefix);
  if (it == penalties_.end()) {
    if (penalties_.size() >= limits_.max_penalized_sources) {
      std::erase_if(penalties_, [&](const auto& e) { return e.second.expiry <= now; });
      if (penalties_.size() >= limits_.max_penalized_sources) return;  // permissive
    }
    it = penalties_.emplace(prefix, Penalty{now, false}).first;
  }
  Penalty& p = it->second;
  if (p.expiry <= now) p = Penalty{now, false};
  p.expiry = std::min(p.expiry + limits_.penalty_timeout, now + limits_.penalty_max);
  if (p.expiry - now >= limits_.penalty_min) p.active = true;
}

size_t SourceLimiter::penalized_sources(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(
      std::count_if(penalties_.begin(), penalties_.end(),
                    [&](const auto& e) { return e.second.active && e.second.expiry > now; }));
}

void SourceLimiter::ReleaseUnauthenticated(const std::string& prefix) {
  auto it = unauthenticated_by_source_.find(prefix);
  if (it == unauthenticated_by_source_.end()) return;
  --unauthenticated_;
  if (--it->second <= 0) unauthenticated_by_source_.erase(it);
}

bool SourceLimiter::TryAuthenticate(const std::string& address, const std::string& person) {
  const std::string prefix = SourcePrefix(address);
  std::lock_guard lock(mu_);
  int& sessions = sessions_by_person_[person];
  if (sessions >= limits_.max_sessions_per_person) {
    if (sessions == 0) sessions_by_person_.erase(person);
    return false;
  }
  ++sessions;
  ReleaseUnauthenticated(prefix);
  return true;
}

void SourceLimiter::Unauthenticate(const std::string& address, const std::string& person) {
  const std::string prefix = SourcePrefix(address);
  std::lock_guard lock(mu_);
  auto it = sessions_by_person_.find(person);
  if (it == sessions_by_person_.end()) return;
  if (--it->second <= 0) sessions_by_person_.erase(it);
  ++unauthenticated_;
  ++unauthenticated_by_source_[prefix];
}

void SourceLimiter::Release(const std::string& address, const std::string& person) {
  const std::string prefix = SourcePrefix(address);
  std::lock_guard lock(mu_);
  if (person.empty()) {
    auto it = unauthenticated_by_source_.find(prefix);
    if (it == unauthenticated_by_source_.end()) return;
    ReleaseUnauthenticated(prefix);
  } else {
    auto it = sessions_by_person_.find(person);
    if (it == sessions_by_person_.end()) return;
    if (--it->second <= 0) sessions_by_person_.erase(it);
  }
  --total_;
}

void SourceLimiter::RecordAuthFailure(const std::string& address, Clock::time_point now) {
  const std::string prefix = SourcePrefix(address);
  std::lock_guard lock(mu_);
  Prune(prefix, now);
  auto& q = failures_[prefix];
  q.push_back(now);
  // Keep memory bounded however hard one source tries.
  while (static_cast<int>(q.size()) > limits_.max_failures_per_source + 1) q.pop_front();
}

std::optional<uint64_t> SourceLimiter::RefusalToLog(const std::string& key, Clock::time_point now,
                                                    std::chrono::seconds interval) {
  std::lock_guard lock(mu_);
  constexpr size_t kKeys = 4096;
  if (refusal_log_.size() >= kKeys && !refusal_log_.contains(key)) {
    // Many sources: forget the quiet ones; if all are loud, the rest share one line.
    std::erase_if(refusal_log_,
                  [&](const auto& e) { return now - e.second.logged_at >= interval; });
  }
  const std::string& k =
      refusal_log_.size() >= kKeys && !refusal_log_.contains(key) ? kOtherSources : key;
  auto [it, fresh] = refusal_log_.try_emplace(k);
  LogState& s = it->second;
  ++s.since;
  if (!fresh && now - s.logged_at < interval) return std::nullopt;
  s.logged_at = now;
  const uint64_t n = s.since;
  s.since = 0;
  return n;
}

int SourceLimiter::open_total() const {
  std::lock_guard lock(mu_);
  return total_;
}

int SourceLimiter::unauthenticated() const {
  std::lock_guard lock(mu_);
  return unauthenticated_;
}

int SourceLimiter::sessions_of(const std::string& person) const {
  std::lock_guard lock(mu_);
  auto it = sessions_by_person_.find(person);
  return it == sessions_by_person_.end() ? 0 : it->second;
}

size_t SourceLimiter::refusal_log_keys() const {
  std::lock_guard lock(mu_);
  return refusal_log_.size();
}

}  // namespace gpuwerk::relay::internal
