#pragma once

// The few libssh calls the relay makes in several places, taking and returning std types. Include
// only from .cc files of src/relay.

#include <libssh/libssh.h>

#include <chrono>
#include <string>

namespace gpuwerk::relay::internal {

/// Sets the blocking-call timeout of `session` (SSH_OPTIONS_TIMEOUT and _USEC), to the
/// millisecond.
void SetTimeout(ssh_session session, std::chrono::milliseconds timeout);

/// True while `session` (may be null: false) is connected and not closed by either side.
bool IsConnected(ssh_session session);

/// "SHA256:…" of a public key, as `ssh-keygen -l` prints it; empty when libssh cannot hash it.
std::string Sha256Fingerprint(ssh_key key);

/// The key blob of the public half of `key`, base64 (RFC 4253 §6.6), as in an authorized_keys
/// line; empty when libssh cannot export it.
std::string PublicKeyBase64(ssh_key key);

}  // namespace gpuwerk::relay::internal
