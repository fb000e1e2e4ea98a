#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::auth {

/// One limit: at most `limit` events of `scope` per subject within a sliding `window`.
struct RateRule {
  std::string_view scope;  ///< e.g. "sign_in_account"; stored with each event
  int limit = 0;
  std::chrono::seconds window{0};
};

/// The subject that stands for a request's source address in per-source limits: an IPv4 address
/// as it is (an IPv4-mapped IPv6 one as its IPv4), an IPv6 address as its /64 prefix (one site
/// or host gets a whole /64, so its addresses count as one, "2001:db8:1:2::/64"), anything else
/// as it is.
std::string SourceSubject(std::string_view address);

/// Sliding-window event counts kept in the store (table `rate_limit_events`), so every server
/// replica counts the same events. Runs inside the caller's transaction. Thread-safe.
class RateLimiter {
 public:
  explicit RateLimiter(core::Clock& clock) : clock_(clock) {}

  /// Seconds until the subject may act again when `rule` is used up, nullopt while under it.
  core::Result<std::optional<int64_t>> RetryAfter(store::Transaction& tx, const RateRule& rule,
                                                  const std::string& subject);
  /// Counts one event now, and forgets this scope's events older than the rule's window.
  core::Result<void> Record(store::Transaction& tx, const RateRule& rule,
                            const std::string& subject);
  /// Forgets the subject's events in `scope`.
  core::Result<void> Clear(store::Transaction& tx, std::string_view scope,
                           const std::string& subject);

  /// The kResourceExhausted "rate_limited" error, with details.retry_after_seconds.
  static core::Error Limited(std::string message, int64_t retry_after_seconds);

 private:
  core::Clock& clock_;
};

}  // namespace gpuwerk::auth
