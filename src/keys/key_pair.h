#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "core/random.h"

namespace gpuwerk::keys {

/// An SSH key pair made by gpuwerk (never a person's key): the worker key of a 2-host instance and
/// the sshd host key of its node 1 (docs/clusters.md).
struct KeyPair {
  /// The private key in OpenSSH's own format (PROTOCOL.key of OpenSSH: "openssh-key-v1",
  /// unencrypted, cipher and KDF "none"), PEM-style armour "-----BEGIN OPENSSH PRIVATE KEY-----",
  /// base64 lines of 70 characters, ending in a newline. A secret: never logged.
  std::string private_openssh;
  /// The public key as one authorized_keys / known_hosts line: "ssh-ed25519 BASE64 COMMENT"
  /// (RFC 8709 §4 key format), no newline.
  std::string public_line;
};

/// Makes an Ed25519 key pair (RFC 8032) from 32 bytes of `rng`. `comment` (printable ASCII without
/// spaces, at most 64 characters, e.g. "gpuwerk-worker-ins_…"; anything else is refused) goes into
/// the private key and ends the public line. `ssh-keygen -y -f` of the private key prints the
/// public line's first two fields. Errors: kInvalidArgument "invalid_key_comment"; kInternal
/// "key_generation_failed" (OpenSSL refused the seed).
core::Result<KeyPair> MakeEd25519KeyPair(core::Rng& rng, std::string_view comment);

}  // namespace gpuwerk::keys
