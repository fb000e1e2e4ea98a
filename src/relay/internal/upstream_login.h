#pragma once

// Include only from .cc files of src/relay (libssh types).

#include <chrono>
#include <expected>
#include <string>

#include "relay/internal/ssh_handles.h"
#include "relay/relay_authorizer.h"

namespace gpuwerk::relay::internal {

/// Why the relay could not log in to an instance's sshd; each is a refusal of the person's login
/// with its own banner (docs/ssh.md "Refusals").
enum class UpstreamLoginFailure {
  kUnreachable,      ///< the sshd does not answer, or the connection or key exchange failed
  kHostKeyMismatch,  ///< it presented another host key than RelayTarget recorded
  /// It refused the relay key with its certificate for this instance (case C07: the relay
  /// credential is missing; or, issue 12 finding 1, this sshd is not that instance's: a
  /// certificate opens only the container whose authorized_keys names its principal).
  kAuthFailed,
  /// The relay could not make its certificate for the instance (ssh-keygen failed): nothing was
  /// tried upstream.
  kNoCredential,
};

/// The stable code recorded for a failure (RelayRefusalRecord::code): `upstream_unreachable`,
/// `upstream_host_key_mismatch`, `upstream_auth_failed`, `relay_credential_unavailable`.
std::string RefusalCode(UpstreamLoginFailure failure);

/// The banner shown to the person whose own key was accepted but whose instance would not let
/// the relay in: names the instance and says whether waiting helps.
std::string RefusalMessage(UpstreamLoginFailure failure, const RelayTarget& target);

/// Connects to `target`'s sshd (blocking, each step bounded by `timeout`), checks its host key
/// when the target carries one, and logs in as `target.login` with the relay key
/// (`relay_key_private`: unencrypted OpenSSH private key text) carrying `certificate` (its OpenSSH
/// user certificate for this instance, "ssh-ed25519-cert-v01@openssh.com AAAA…": libssh's
/// ssh_pki_import_cert_base64 and ssh_pki_copy_cert_to_privkey, then ssh_userauth_publickey,
/// which offers the certificate, OpenSSH PROTOCOL.certkeys). Returns the logged-in session,
/// still in blocking mode; logs the cause of a failure. On kHostKeyMismatch `presented_host_key`
/// (when given) gets the fingerprint the sshd presented ("" when it presented none).
std::expected<SshSessionPtr, UpstreamLoginFailure> LogInUpstream(
    const RelayTarget& target, const std::string& relay_key_private, const std::string& certificate,
    std::chrono::milliseconds timeout, std::string* presented_host_key = nullptr);

}  // namespace gpuwerk::relay::internal
