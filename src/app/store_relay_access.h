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

/// Relay session records into the audit log: `relay_session.start`, `relay_session.end`
/// (with the bytes each way and the reason it ended) and `relay_session.refused`, each with the
/// person as actor, the instance as target, the client's address as source and the key
/// fingerprint in the detail. Written on the calling relay thread (one small transaction); a
/// store error is logged, never thrown. Thread-safe.
class AuditRelaySessionLog final : public relay::RelaySessionLog {
 public:
  AuditRelaySessionLog(store::Database& db, core::Clock& clock, core::Rng& rng)
      : db_(db), clock_(clock), rng_(rng) {}
  void OnStart(const relay::RelaySessionRecord& record) override;
  void OnEnd(const relay::RelaySessionRecord& record) override;
  void OnRefused(const relay::RelayRefusalRecord& record) override;

 private:
  void Write(const std::string& actor, const std::string& action, const std::string& target,
             const std::string& source, nlohmann::json detail);
  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
};

}  // namespace gpuwerk::app
