#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gpuwerk::relay {

/// One relay session (DESIGN.md R-10): who came in with which key, from where, to which instance,
/// when, and how many bytes went each way. Bytes are SSH channel payload bytes (what the
/// programs on either end read and wrote), not TCP bytes.
struct RelaySessionRecord {
  /// "rls_" + 16 random base32 characters (80 bits, core::NewId): unique across relays and
  /// restarts, so it keys the stored record (access::RelaySessionRow::id).
  std::string id;
  uint64_t relay_session_id = 0;  ///< the connection's number within this relay process (logs)
  std::string person_id;
  std::string key_fingerprint;  ///< "SHA256:…"
  std::string instance_id;
  std::string hostname;
  std::string login;
  std::string source_address;  ///< the client's IP address
  std::chrono::system_clock::time_point started_at;
  std::chrono::system_clock::time_point ended_at;  ///< unset (epoch) in OnStart
  uint64_t bytes_from_client = 0;                  ///< client → instance
  uint64_t bytes_to_client = 0;                    ///< instance → client
  /// "client closed", "instance closed", "revoked: …", "relay stopping", or a bound the client
  /// or instance went past ("the client sent more than its channel window allows (…)", "the
  /// client queued more than N requests on one channel"; docs/ssh.md "Memory").
  std::string end_reason;
};

/// A login the relay refused after the client proved its key, or could not carry upstream
/// (case C07). `code` is stable: `not_authorized` (the authorizer refused),
/// `invalid_relay_user` (a user name longer than protocol::kMaxRelayUserBytes, refused by the
/// relay without asking the authorizer), `authorizer_unavailable`, `upstream_unreachable`,
/// `upstream_auth_failed`, `upstream_host_key_mismatch`, `too_many_sessions` (the person holds
/// max_sessions_per_person).
struct RelayRefusalRecord {
  std::string code;
  std::string message;  ///< what the person was told (the banner)
  /// The SSH user name as sent, in its bounded printable form (core::BoundedPrintable: escaped,
  /// at most 256 bytes then `…[N bytes]`): outside text, escaped once, here (the relay's
  /// refusal, internal/client_login.cc), and written as it is by every sink, the server's audit
  /// included (docs/ssh.md "Outside text").
  std::string user;
  std::string key_fingerprint;
  std::string person_id;    ///< empty unless the authorizer had let it through
  std::string instance_id;  ///< empty unless the authorizer had let it through
  /// upstream_host_key_mismatch only: the host key the instance's sshd was pinned with, and the
  /// one it presented ("SHA256:…").
  std::string expected_host_key;
  std::string presented_host_key;
  std::string source_address;
  std::chrono::system_clock::time_point at;
};

/// Receives the relay's audit records. Called from relay session threads, concurrently:
/// implementations must be thread-safe and quick (queue the write; a slow sink delays that relay
/// session only).
class RelaySessionLog {
 public:
  virtual ~RelaySessionLog() = default;
  /// After the client authenticated and the upstream accepted the relay's credential.
  virtual void OnStart(const RelaySessionRecord& record) = 0;
  /// Exactly once per OnStart, when the relay session has ended (its byte counts are final).
  virtual void OnEnd(const RelaySessionRecord& record) = 0;
  /// A refused login after key proof (see RelayRefusalRecord).
  virtual void OnRefused(const RelayRefusalRecord& record) = 0;
};

}  // namespace gpuwerk::relay
