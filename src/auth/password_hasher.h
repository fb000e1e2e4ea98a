#pragma once

#include <string>
#include <string_view>

#include "core/concurrency_limit.h"
#include "core/error.h"

namespace gpuwerk::auth {

/// How expensive a password hash is. Interactive is libsodium's OPSLIMIT/MEMLIMIT_INTERACTIVE
/// (2 passes, 64 MiB): the production setting. kTestOnlyMinimum (1 pass, 8 KiB) exists so test
/// suites that sign up hundreds of people run quickly; never use it in production.
enum class HashCost { kInteractive, kModerate, kTestOnlyMinimum };

/// Password hashing with argon2id (RFC 9106) through libsodium's crypto_pwhash_str, which
/// encodes algorithm, parameters and salt in the returned PHC string. Thread-safe.
///
/// Each hash takes 64 MiB and tens of milliseconds on purpose, on the caller's thread (an HTTP
/// thread). So that a flood of sign-ups or sign-ins cannot take every thread, hashes and
/// verifications take a slot of `slots` and are refused at once when none is free (never
/// queued): callers refuse cheaply first (rate limits, token look-ups) and answer 503 when told
/// the hasher is busy.
class PasswordHasher {
 public:
  /// `slots`: how many hashes may run at once (e.g. half the HTTP threads); must outlive the
  /// hasher. Null: no limit.
  explicit PasswordHasher(HashCost cost = HashCost::kInteractive,
                          core::ConcurrencyLimit* slots = nullptr)
      : cost_(cost), slots_(slots) {}

  /// Checks the password policy: 8 to 1024 bytes of UTF-8. Errors: kInvalidArgument
  /// "weak_password" (length), "invalid_password" (not UTF-8).
  static core::Result<void> CheckPolicy(std::string_view password);
  /// Hashes `password` with a fresh random salt. Errors: Busy() when no slot is free;
  /// kInternal when memory is short.
  core::Result<std::string> Hash(std::string_view password) const;
  /// Whether `password` matches `hash` (constant time in the password). Errors: Busy().
  core::Result<bool> Verify(std::string_view hash, std::string_view password) const;
  /// A hash of a password nobody has, to verify against for an unknown account so that the
  /// answer takes as long as for a known one. Made once, outside the slots.
  const std::string& DummyHash() const;
  /// kUnavailable "server_busy" (503, `retry_after_seconds` 1): every slot is in use.
  static core::Error Busy();

 private:
  core::Result<std::string> HashNow(std::string_view password) const;

  HashCost cost_;
  core::ConcurrencyLimit* slots_;
};

}  // namespace gpuwerk::auth
