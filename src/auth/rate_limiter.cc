#include "auth/rate_limiter.h"

#include <algorithm>

namespace gpuwerk::auth {

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
