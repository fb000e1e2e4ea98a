#pragma once

#include "access/relay_access.h"
#include "core/access_change_feed.h"
#include "core/clock.h"
#include "core/random.h"
#include "relay/relay.h"
#include "relay/relay_authorizer.h"
#include "relay/relay_session_log.h"
#include "sched/instance_service.h"
#include "store/database.h"

namespace gpuwerk::app {

/// The relay's RelayAuthorizer for a relay running in the server's process (tests): the
/// server's own decision (access::RelayAccess, the one behind `POST /api/v1/relay/authorize`)
/// through the relay's wire conversions, so both answer alike.
///
/// Errors: the store's (the relay then refuses with "try again"). Thread-safe.
class StoreRelayAuthorizer final : public relay::RelayAuthorizer {
 public:
  StoreRelayAuthorizer(store::Database& db, sched::InstanceService& instances, core::Clock& clock,
                       core::Rng& rng)
      : access_(db, instances, clock, rng) {}
  core::Result<relay::AuthorizeDecision> Authorize(const relay::AuthorizeRequest& request) override;

 private:
  access::RelayAccess access_;
};

/// Relay session records of a relay in the server's process (tests), straight into the
/// store: each relay session is a row of `relay_sessions` with relay "local"
/// (store::RecordRelaySession Start / End: open at OnStart, its end, bytes each way and reason at
/// OnEnd), and the audit log gets `relay_session.start`, `relay_session.end` (with the bytes and
/// the reason) and `relay_session.refused`, each with the person as actor, the instance as target,
/// the client's address as source and the key fingerprint in the detail. Each is one small
/// transaction on the calling relay thread; a store error is logged, never thrown. Thread-safe.
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

/// The push path of a relay in the server's process (tests; docs/ssh.md "Revocation"): every change
/// published to `feed` has `relay` re-check, at once and on its re-check thread, exactly the
/// relay sessions it names (relay::Relay::RecheckRelaySessions). Unsubscribes when destroyed;
/// `feed` and `relay` must outlive it.
class RelayAccessPush {
 public:
  RelayAccessPush(core::AccessChangeFeed& feed, relay::Relay& relay)
      : feed_(feed), id_(feed.Subscribe([&relay](const core::AccessChange& c) {
          relay.RecheckRelaySessions(c);
        })) {}
  ~RelayAccessPush() { feed_.Unsubscribe(id_); }
  RelayAccessPush(const RelayAccessPush&) = delete;
  RelayAccessPush& operator=(const RelayAccessPush&) = delete;

 private:
  core::AccessChangeFeed& feed_;
  uint64_t id_;
};

}  // namespace gpuwerk::app
