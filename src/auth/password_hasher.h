#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::auth {

/// How expensive a password hash is. Interactive is libsodium's OPSLIMIT/MEMLIMIT_INTERACTIVE
/// (2 passes, 64 MiB): the production setting. kTestOnlyMinimum (1 pass, 8 KiB) exists so test
/// suites that sign up hundreds of people run quickly; never use it in production.
enum class HashCost { kInteractive, kModerate, kTestOnlyMinimum };

/// Password hashing with argon2id (RFC 9106) through libsodium's crypto_pwhash_str, which
/// encodes algorithm, parameters and salt in the returned PHC string. Thread-safe.
class PasswordHasher {
 public:
  explicit PasswordHasher(HashCost cost = HashCost::kInteractive) : cost_(cost) {}

  /// Checks the password policy: 8 to 1024 bytes of UTF-8. Errors: kInvalidArgument
  /// "weak_password" (length), "invalid_password" (not UTF-8).
  static core::Result<void> CheckPolicy(std::string_view password);
  /// Hashes `password` with a fresh random salt. Errors: kInternal when memory is short.
  core::Result<std::string> Hash(std::string_view password) const;
  /// True when `password` matches `hash` (constant time in the password).
  bool Verify(std::string_view hash, std::string_view password) const;

 private:
  HashCost cost_;
};

}  // namespace gpuwerk::auth
