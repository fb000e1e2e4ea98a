#pragma once

// Include only from .cc files of src/relay (libssh types).

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "relay/internal/source_limiter.h"
#include "relay/internal/ssh_handles.h"
#include "relay/relay.h"
#include "relay/relay_certificates.h"

namespace gpuwerk::relay::internal {

/// What the Relay (other threads) knows about one connection and how it asks it to end.
struct ConnectionControl {
  uint64_t id = 0;
  std::string record_id;  ///< RelaySessionRecord::id ("rls_…"), drawn at accept
  std::string source_address;
  int wake_fd = -1;  ///< eventfd the connection's loop polls; owned by the Relay's registry

  std::string source_prefix;                          ///< SourcePrefix(source_address)
  std::chrono::steady_clock::time_point accepted_at;  ///< set before the thread starts
  /// The client's identification string arrived (a silent connection may be evicted).
  std::atomic<bool> banner_received{false};
  std::atomic<bool> close_requested{false};
  std::atomic<bool> authenticated{false};
  std::atomic<bool> finished{false};

  std::mutex mu;  ///< guards the fields below
  std::string close_reason;
  std::string instance_id;
  std::string person_id;
  std::string login;         ///< RelayTarget::login, once authenticated
  std::string hostname;      ///< RelayTarget::hostname, once authenticated
  AuthorizeRequest request;  ///< what was authorized (the re-check asks it again)
  int client_fd = -1;        ///< valid while the connection holds its socket (-1 after)

  /// Asks the connection to end (thread-safe, idempotent); it tells the client `reason`.
  void RequestClose(const std::string& reason);
  /// Shuts the client socket down (unblocks a handshake in progress). Thread-safe.
  void ShutdownSocket();
};

/// Everything a connection needs from its Relay; the pointers outlive the connection.
struct ConnectionContext {
  const RelayOptions* options = nullptr;
  RelayAuthorizer* authorizer = nullptr;
  RelaySessionLog* log = nullptr;
  const std::string* relay_key_private = nullptr;  ///< OpenSSH private key text
  RelayCertificates* certificates = nullptr;       ///< the relay key's certificate per instance
  SourceLimiter* limiter = nullptr;
  /// Bumped by every pushed access change (Relay::RecheckRelaySessions). A login that saw it
  /// change between its authorization and becoming a relay session asks `recheck` for itself,
  /// so that no change slips past a login in flight.
  const std::atomic<uint64_t>* access_changes = nullptr;
  std::function<void(uint64_t connection_id)> recheck;
};

/// Serves one accepted client until it ends: key exchange, public-key authentication through the
/// authorizer, the upstream login, then channel forwarding. Runs on its own thread; `client` is
/// the accepted session, before its key exchange.
void RunConnection(SshSessionPtr client, const ConnectionContext& context,
                   ConnectionControl& control);

}  // namespace gpuwerk::relay::internal
