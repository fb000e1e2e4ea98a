#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::keys::internal {

/// Converts the DER contents of a PEM public key into the SSH wire-format key blob
/// (RFC 4253 §6.6, RFC 5656 §3.1, RFC 8709 §4), the same blob `ssh-keygen -i -m PKCS8|PEM`
/// produces. `label` is the PEM label:
/// - "PUBLIC KEY": X.509 SubjectPublicKeyInfo (RFC 5280 §4.1.2.7) holding RSA, EC on P-256,
///   P-384 or P-521 (RFC 5480), or Ed25519 (RFC 8410);
/// - "RSA PUBLIC KEY": PKCS#1 RSAPublicKey (RFC 8017 appendix A.1.1).
/// The blob is not yet checked for key size; the caller validates it like any other blob.
/// Errors (all kInvalidArgument): "invalid_public_key" for DER that does not decode (or has
/// trailing bytes), "unsupported_key_type" for DSA and any other algorithm or curve.
/// OpenSSL 3 underneath; thread-safe (the OpenSSL error queue is cleared before returning).
core::Result<std::string> PemDerToSshBlob(std::string_view label, std::string_view der);

/// Whether `sec1_point` (uncompressed, 0x04 || X || Y; SEC 1 §2.3.4) is a point on the named
/// OpenSSH curve ("nistp256", "nistp384" or "nistp521"), as sshd checks before accepting an
/// ECDSA key (RFC 5656 §3.1). False for unknown curves. OpenSSL 3; thread-safe.
bool IsPointOnCurve(std::string_view curve, std::string_view sec1_point);

}  // namespace gpuwerk::keys::internal
