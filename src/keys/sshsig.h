#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "core/error.h"
#include "keys/public_key.h"

namespace gpuwerk::keys {

/// The SSHSIG namespace (OpenSSH PROTOCOL.sshsig, `ssh-keygen -Y sign -n …`) of a key claim's
/// signature: a signature made for anything else (git commits, files) never proves a claim.
inline constexpr std::string_view kKeyClaimNamespace = "gpuwerk-key-claim";

/// The most bytes of an armored signature VerifySshSignature reads (an RSA-16384 SSHSIG is about
/// 3 KiB armored).
inline constexpr size_t kMaxArmoredSignature = 8 * 1024;

/// Checks that `armored_signature` (`-----BEGIN SSH SIGNATURE-----` … `-----END SSH
/// SIGNATURE-----`, as `ssh-keygen -Y sign` writes it; OpenSSH PROTOCOL.sshsig) is a signature by
/// `key`'s private half over exactly `message` in namespace `sig_namespace`. libssh 0.10 has no
/// SSHSIG verification, so this runs OpenSSH's own `ssh-keygen -Y verify` (`ssh_keygen`, found on
/// PATH) with an allowed-signers list holding only `key`, the signature and the message passed on
/// descriptors (no temporary files, nothing from the caller on its argv), waits at most
/// `timeout`, and reads its exit status only. Cheap checks come first: the armor's size, lines and
/// alphabet are refused before anything runs. Thread-safe (one child per call).
/// Errors: kInvalidArgument "invalid_signature" (not an armored SSH signature, too large, or it
/// does not verify: another key, message or namespace); kUnavailable
/// "signature_check_unavailable" (ssh-keygen cannot be run or did not finish in time).
core::Result<void> VerifySshSignature(const PublicKey& key, std::string_view sig_namespace,
                                      std::string_view message, std::string_view armored_signature,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                      const std::string& ssh_keygen = "ssh-keygen");

}  // namespace gpuwerk::keys
