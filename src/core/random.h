#pragma once

#include <cstddef>
#include <string>

namespace gpuwerk::core {

/// Source of cryptographically secure randomness (libsodium's randombytes), injectable for
/// tests. Thread-safe.
class Rng {
 public:
  virtual ~Rng() = default;
  /// Fills `out` with `n` random bytes.
  virtual void Fill(void* out, size_t n) = 0;
};

/// libsodium's CSPRNG (getrandom(2) underneath).
class SodiumRng final : public Rng {
 public:
  void Fill(void* out, size_t n) override;
};

/// A random secret of `bytes` bytes, base64url without padding (32 bytes = 256 bits → 43 chars).
std::string RandomToken(Rng& rng, size_t bytes = 32);

/// A random identifier `<prefix>_<16 lowercase base32 chars>` (80 bits), e.g. "key_2f7q…".
std::string NewId(Rng& rng, std::string_view prefix);

}  // namespace gpuwerk::core
