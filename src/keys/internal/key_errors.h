#pragma once

#include <expected>
#include <string>

#include "core/error.h"

/// The errors ParsePublicKey returns, in one place so every path words them alike. Messages are
/// fixed text: they never contain any part of the caller's input.
namespace gpuwerk::keys::internal {

inline std::unexpected<core::Error> InvalidKey(std::string message) {
  return core::InvalidArgument("invalid_public_key", std::move(message));
}

inline std::unexpected<core::Error> UnsupportedType(std::string message) {
  return core::InvalidArgument("unsupported_key_type", std::move(message));
}

inline std::unexpected<core::Error> DsaRefused() {
  return UnsupportedType(
      "DSA keys are no longer accepted by OpenSSH; generate an ed25519 key with "
      "ssh-keygen -t ed25519 and paste the contents of its .pub file.");
}

inline std::unexpected<core::Error> UnknownType() {
  return UnsupportedType(
      "This key type is not supported. Use ssh-ed25519 (recommended), "
      "ecdsa-sha2-nistp256/384/521, ssh-rsa of at least 2048 bits, or a security-key type "
      "(sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com).");
}

inline std::unexpected<core::Error> WeakKey() {
  return core::InvalidArgument(
      "weak_key",
      "RSA keys must have at least 2048 bits; generate a new key with ssh-keygen -t ed25519 "
      "(or ssh-keygen -t rsa -b 4096).");
}

}  // namespace gpuwerk::keys::internal
