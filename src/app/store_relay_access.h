#pragma once

#include "core/clock.h"
#include "core/random.h"
#include "relay/relay_authorizer.h"
#include "relay/relay_session_log.h"
#include "sched/instance_service.h"
#include "store/database.h"

namespace gpuwerk::app {

/// The relay's access decision taken straight from the store, for a relay running in the
/// server's process (`gpuwerk up`). The candidates are the live instances (desired `running`)
/// whose SSH key has the offered key's fingerprint, each with its node-0 sshd address and port as
/// the host's agent last reported them; the routing rules over them are the relay's own
/// (relay::InMemoryRelayAuthorizer, docs/ssh.md), so this and the server endpoint for remote
/// relays answer alike. A deleted instance, or a key no longer attached, is refused at the next
/// login and at the relay's next re-authorization.
///
/// Errors: the store's (the relay then refuses with "try again"). Thread-safe.
class StoreRelayAuthorizer final : public relay::RelayAuthorizer {
 public:
  StoreRelayAuthorizer(store::Database& db, sched::InstanceService& instances)
      : db_(db), instances_(instances) {}
  core::Result<relay::AuthorizeDecision> Authorize(const relay::AuthorizeRequest& request) override;

 private:
  store::Database& db_;
  sched::InstanceService& instances_;
};

/// Relay session records of `gpuwerk up`'s in-process relay, straight into the store:
/// each relay session is a row of `relay_sessions` with relay "local" (store::RecordRelaySession
/// Start / End: open at OnStart, its end, bytes each way and reason at OnEnd), and the audit log
/// gets `relay_session.start`, `relay_session.end` (with the bytes and the reason) and
/// `relay_session.refused`, each with the person as actor, the instance as target, the client's
/// address as source and the key fingerprint in the detail. Each is one small transaction on the
/// calling relay thread; a store error is logged, never thrown. Thread-safe.
class AuditRelaySessionLog final : public relay::RelaySessionLog {
 public:
  /// The `relay` of the rows this log writes.
  static constexpr const char* kRelayName = "local";

  AuditRelaySessionLog(store::Database& db, core::Clock& clock, core::Rng& rng)
      : db_(db), clock_(clock), rng_(rng) {}
  /// Closes the rows a previous run's relay left open (it was killed before their end) with
  /// "relay restarted" (access::CloseOpenRelaySessions). Call it before the relay starts.
  /// Returns how many it closed. Errors: the store's.
  core::Result<int64_t> CloseLeftOpen();
  void OnStart(const relay::RelaySessionRecord& record) override;
  void OnEnd(const relay::RelaySessionRecord& record) override;
  void OnRefused(const relay::RelayRefusalRecord& record) override;

 private:
  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
};

}  // namespace gpuwerk::app
