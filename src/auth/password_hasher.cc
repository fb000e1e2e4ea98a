#include "auth/password_hasher.h"

#include <sodium.h>

#include <optional>

#include "core/encoding.h"

namespace gpuwerk::auth {

core::Result<void> PasswordHasher::CheckPolicy(std::string_view password) {
  if (password.size() < 8) {
    return core::InvalidArgument("weak_password", "The password must be at least 8 characters.");
  }
  if (!core::IsValidUtf8(password)) {
    return core::InvalidArgument("invalid_password", "The password must be UTF-8 text.");
  }
  if (password.size() > 1024) {
    return core::InvalidArgument("weak_password", "The password must be at most 1024 characters.");
  }
  return {};
}

core::Error PasswordHasher::Busy() {
  return core::Error(core::ErrorCode::kUnavailable, "server_busy",
                     "The server is busy checking passwords; try again in a moment.")
      .WithDetail("retry_after_seconds", 1);
}

core::Result<std::string> PasswordHasher::Hash(std::string_view password) const {
  const auto slot = slots_ != nullptr ? slots_->TryAcquire() : std::nullopt;
  if (slots_ != nullptr && !slot) return core::Fail(Busy());
  return HashNow(password);
}

const std::string& PasswordHasher::DummyHash() const {
  static const std::string kDummy = [this] {
    auto h = HashNow("not-a-real-password");
    return h ? *h : std::string();
  }();
  return kDummy;
}

core::Result<std::string> PasswordHasher::HashNow(std::string_view password) const {
  unsigned long long ops = crypto_pwhash_OPSLIMIT_INTERACTIVE;
  size_t mem = crypto_pwhash_MEMLIMIT_INTERACTIVE;
  if (cost_ == HashCost::kModerate) {
    ops = crypto_pwhash_OPSLIMIT_MODERATE;
    mem = crypto_pwhash_MEMLIMIT_MODERATE;
  } else if (cost_ == HashCost::kTestOnlyMinimum) {
    ops = crypto_pwhash_OPSLIMIT_MIN;
    mem = crypto_pwhash_MEMLIMIT_MIN;
  }
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str_alg(out, password.data(), password.size(), ops, mem,
                            crypto_pwhash_ALG_ARGON2ID13) != 0) {
    return core::Internal("password hashing ran out of memory");
  }
  return std::string(out);
}

core::Result<bool> PasswordHasher::Verify(std::string_view hash, std::string_view password) const {
  const auto slot = slots_ != nullptr ? slots_->TryAcquire() : std::nullopt;
  if (slots_ != nullptr && !slot) return core::Fail(Busy());
  std::string h(hash);
  return crypto_pwhash_str_verify(h.c_str(), password.data(), password.size()) == 0;
}

}  // namespace gpuwerk::auth
