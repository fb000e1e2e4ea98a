#include "auth/rate_limiter.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdio>

namespace gpuwerk::auth {

std::string SourceSubject(std::string_view address) {
  const std::string text(address);
  std::array<unsigned char, 16> v6{};
  if (::inet_pton(AF_INET6, text.c_str(), v6.data()) != 1) return text;
  const bool v4_mapped =
      std::all_of(v6.begin(), v6.begin() + 10, [](unsigned char b) { return b == 0; }) &&
      v6[10] == 0xff && v6[11] == 0xff;
  if (v4_mapped) {
    char v4[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, v6.data() + 12, v4, sizeof(v4));
    return v4;
  }
  char prefix[64] = {};
  std::snprintf(prefix, sizeof(prefix), "%x:%x:%x:%x::/64", v6[0] << 8 | v6[1], v6[2] << 8 | v6[3],
                v6[4] << 8 | v6[5], v6[6] << 8 | v6[7]);
  return prefix;
}

core::Result<std::optional<int64_t>> RateLimiter::RetryAfter(store::Transaction& tx,
                                                             const RateRule& rule,
                                                             const std::string& subject) {
  const int64_t now = clock_.NowUnix();
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n, MIN(at) AS oldest FROM rate_limit_events "
                            "WHERE scope = ? AND subject = ? AND at > ?",
                            {std::string(rule.scope), subject, now - rule.window.count()}));
  if (!row || row->Int("n") < rule.limit) return std::optional<int64_t>();
  return std::optional<int64_t>(
      std::max<int64_t>(1, row->Int("oldest") + rule.window.count() - now + 1));
}

core::Result<void> RateLimiter::Record(store::Transaction& tx, const RateRule& rule,
                                       const std::string& subject) {
  const int64_t now = clock_.NowUnix();
  GPUWERK_TRY(tx.Exec("DELETE FROM rate_limit_events WHERE scope = ? AND at <= ?",
                      {std::string(rule.scope), now - rule.window.count()}));
  GPUWERK_TRY(tx.Exec("INSERT INTO rate_limit_events (scope, subject, at) VALUES (?, ?, ?)",
                      {std::string(rule.scope), subject, now}));
  return {};
}

core::Result<void> RateLimiter::Clear(store::Transaction& tx, std::string_view scope,
                                      const std::string& subject) {
  GPUWERK_TRY(tx.Exec("DELETE FROM rate_limit_events WHERE scope = ? AND subject = ?",
                      {std::string(scope), subject}));
  return {};
}

core::Error RateLimiter::Limited(std::string message, int64_t retry_after_seconds) {
  return core::Error(core::ErrorCode::kResourceExhausted, "rate_limited", std::move(message))
      .WithDetail("retry_after_seconds", retry_after_seconds);
}

}  // namespace gpuwerk::auth
