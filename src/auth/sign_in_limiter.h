#pragma once

#include <chrono>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::auth {

/// Limits on failed sign-ins, counted in the store so every server replica sees them.
struct SignInLimits {
  int per_account = 5;                   ///< failures per account within `window`
  int per_address = 20;                  ///< failures per source address within `window`
  std::chrono::seconds window{15 * 60};  ///< sliding window
};

/// Counts failed sign-ins per account (normalised email) and per source address in a sliding
/// window. Thread-safe (all state is in the store).
class SignInLimiter {
 public:
  SignInLimiter(core::Clock& clock, SignInLimits limits) : clock_(clock), limits_(limits) {}

  /// Errors: kResourceExhausted "rate_limited" (details.retry_after_seconds) when either limit
  /// is reached.
  core::Result<void> Check(store::Transaction& tx, const std::string& email_norm,
                           const std::string& address);
  /// Records one failure for both subjects and drops rows older than the window.
  core::Result<void> RecordFailure(store::Transaction& tx, const std::string& email_norm,
                                   const std::string& address);
  /// Forgets the account's failures after a successful sign-in.
  core::Result<void> Reset(store::Transaction& tx, const std::string& email_norm);

 private:
  core::Clock& clock_;
  SignInLimits limits_;
};

}  // namespace gpuwerk::auth
