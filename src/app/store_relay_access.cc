#include "app/store_relay_access.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "relay/in_memory_relay_authorizer.h"
#include "store/audit_log.h"

namespace gpuwerk::app {

core::Result<relay::AuthorizeDecision> StoreRelayAuthorizer::Authorize(
    const relay::AuthorizeRequest& request) {
  GPUWERK_ASSIGN_OR_RETURN(auto rows, db_.Read([&](store::Transaction& tx) {
    return tx.Query(
        "SELECT i.id, i.person_id FROM instances i JOIN ssh_keys k ON k.id = i.ssh_key_id "
        "WHERE k.fingerprint = ? AND i.deleted_at IS NULL AND i.desired = 'running'",
        {request.key_fingerprint});
  }));
  relay::InMemoryRelayAuthorizer rules;
  for (const auto& row : rows) {
    auto in = instances_.Get(row.Text(1), row.Text(0));
    if (!in) {
      if (in.error().code == core::ErrorCode::kNotFound) continue;  // deleted meanwhile
      return std::unexpected(in.error());
    }
    rules.Put({.instance_id = in->id,
               .name = in->name,
               .hostname = in->hostname,
               .person_id = row.Text(1),
               .upstream_host = in->ssh_address.empty() ? "127.0.0.1" : in->ssh_address,
               .upstream_port = static_cast<uint16_t>(in->ssh_port),
               .key_fingerprints = {request.key_fingerprint}});
  }
  return rules.Authorize(request);
}

namespace {

int64_t UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

void AuditRelaySessionLog::Write(const std::string& actor, const std::string& action,
                                 const std::string& target, const std::string& source,
                                 nlohmann::json detail) {
  auto done = db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    return store::RecordAudit(tx, clock_, rng_,
                              {.actor_id = actor,
                               .action = action,
                               .target = target,
                               .source_address = source,
                               .detail = std::move(detail)});
  });
  if (!done) spdlog::error("relay: cannot record {}: {}", action, done.error().message);
}

void AuditRelaySessionLog::OnStart(const relay::RelaySessionRecord& r) {
  Write(r.person_id, "relay_session.start", r.instance_id, r.source_address,
        {{"relay_session_id", r.relay_session_id},
         {"key_fingerprint", r.key_fingerprint},
         {"hostname", r.hostname},
         {"login", r.login},
         {"started_at", UnixSeconds(r.started_at)}});
}

void AuditRelaySessionLog::OnEnd(const relay::RelaySessionRecord& r) {
  Write(r.person_id, "relay_session.end", r.instance_id, r.source_address,
        {{"relay_session_id", r.relay_session_id},
         {"key_fingerprint", r.key_fingerprint},
         {"hostname", r.hostname},
         {"login", r.login},
         {"started_at", UnixSeconds(r.started_at)},
         {"ended_at", UnixSeconds(r.ended_at)},
         {"bytes_from_client", r.bytes_from_client},
         {"bytes_to_client", r.bytes_to_client},
         {"end_reason", r.end_reason}});
}

void AuditRelaySessionLog::OnRefused(const relay::RelayRefusalRecord& r) {
  Write(r.person_id, "relay_session.refused", r.instance_id, r.source_address,
        {{"code", r.code}, {"user", r.user}, {"key_fingerprint", r.key_fingerprint}});
}

}  // namespace gpuwerk::app
