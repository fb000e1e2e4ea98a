#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "protocol/relay_messages.h"

namespace gpuwerk::relay {

/// What the relay knows about one client's login attempt when it asks whether to let it through.
/// The key has already been proven: the relay asks only after the client's signature over the
/// session identifier verified (RFC 4252 §7), so listing this key's instances in a refusal shows
/// them only to the key's holder.
struct AuthorizeRequest {
  std::string user;             ///< the SSH user name exactly as the client sent it
  std::string key_type;         ///< e.g. "ssh-ed25519"
  std::string key_blob_base64;  ///< the public key blob (RFC 4253 §6.6), base64
  std::string key_fingerprint;  ///< "SHA256:…" as `ssh-keygen -l` prints it
  std::string source_address;   ///< the client's IP address, numeric, no port
};

/// Where an authorized login goes: the wire type itself (protocol::RelayTarget), so the remote
/// relay's answer needs no copy.
using RelayTarget = protocol::RelayTarget;

/// The authorizer's answer: exactly one of `target` (let through) or `refusal` (a message for the
/// person, shown by their SSH client as an authentication banner; one or more lines, no
/// secrets, never another person's instance names).
struct AuthorizeDecision {
  std::optional<RelayTarget> target;
  std::string refusal;

  static AuthorizeDecision Allow(RelayTarget t) { return {std::move(t), {}}; }
  static AuthorizeDecision Refuse(std::string message) {
    return {std::nullopt, std::move(message)};
  }
};

/// One open relay session, as the relay asks whether it may go on (RelayAuthorizer::Recheck).
struct RecheckItem {
  std::string relay_session_id;  ///< RelaySessionRecord::id ("rls_…")
  AuthorizeRequest request;      ///< exactly what was authorized at login
  std::string instance_id;       ///< where it went (RelayTarget::instance_id)
  std::string login;             ///< as whom (RelayTarget::login)
};

/// The answer for one RecheckItem: whether the relay session may go on. It may when the same
/// request would still be let through to the same instance as the same login.
struct RecheckVerdict {
  bool allowed = false;
  std::string message;  ///< for the person when not allowed ("" → the relay's own wording)
};

/// The relay's routing and access decision (DESIGN.md; cases C06, C09): given the SSH
/// user name, the proven public key and the source address, either a target or a refusal. The user
/// name scheme is in docs/ssh.md (`<hostname>` or `<login>+<hostname>`; a bare `<login>` is
/// refused, never routed by key). The target's person is the one who authenticated. The
/// server-backed implementation asks `POST /api/v1/relay/authorize`.
///
/// Thread-safety: implementations are called concurrently from every relay session's thread.
/// Errors: an Error (e.g. kUnavailable when the server cannot be reached) refuses the login with a
/// "try again" message; it is never taken as a permission.
class RelayAuthorizer {
 public:
  virtual ~RelayAuthorizer() = default;
  virtual core::Result<AuthorizeDecision> Authorize(const AuthorizeRequest& request) = 0;

  /// Whether each open relay session of `items` may go on: one verdict per item, in order. The
  /// relay calls it off its data path (docs/ssh.md "Revocation"): from its re-check thread,
  /// every RelayOptions::recheck_interval for all relay sessions and at once for those an
  /// access change names. This default asks Authorize once per item and allows an item whose
  /// target is the same instance and login; the server-backed implementation sends one batch
  /// (`POST /api/v1/relay/recheck`).
  /// Errors: Authorize's (the first one stops the batch). kUnauthenticated or
  /// kPermissionDenied (the relay's credential refused) makes the relay end every relay session
  /// at once; any other error counts as one failed re-check (RelayOptions::max_failed_rechecks).
  virtual core::Result<std::vector<RecheckVerdict>> Recheck(const std::vector<RecheckItem>& items);
};

}  // namespace gpuwerk::relay
