#include "access/relay_refusals.h"

#include "audit/audit_log.h"
#include "core/strings.h"
#include "sched/instance_table.h"

namespace gpuwerk::access {
namespace {

/// Outside text in the one form audit details hold (core::BoundedPrintable).
std::string Text(const std::string& s) { return core::BoundedPrintable(s); }

/// Who a refusal's audit events name: the actor and target when the store confirms them, and
/// otherwise the ids the relay claimed as details.
struct RefusalParties {
  std::string actor_id;  ///< the person; "" (the system) unless the store confirms it
  std::string target;    ///< the instance; "" unless the store confirms it
  nlohmann::json claimed = nlohmann::json::object();  ///< {claimed_person_id, claimed_instance_id}
};

/// The person and instance a relay names are the actor and target only when the instance is
/// that person's (live or deleted: the refusal may cross the deletion), which is what the
/// authorizer let through (the key's owner, to that owner's instance). Anything else (an unknown
/// id, another person's instance, a person without an instance) names nobody: the claimed ids go
/// into the details, bounded and escaped, for the operator. Errors: the store's.
core::Result<RefusalParties> CheckRefusalParties(store::Transaction& tx,
                                                 const protocol::RelayRefusalGroup& g) {
  RefusalParties parties;
  if (!g.person_id.empty() && !g.instance_id.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(auto owned,
                             sched::InstanceTable::FindOwned(tx, g.person_id, g.instance_id));
    if (owned) {
      parties.actor_id = g.person_id;
      parties.target = g.instance_id;
      return parties;
    }
  }
  if (!g.person_id.empty() || !g.instance_id.empty()) {
    parties.claimed = {{"claimed_person_id", Text(g.person_id)},
                       {"claimed_instance_id", Text(g.instance_id)}};
  }
  return parties;
}

}  // namespace

core::Result<void> RecordRelayRefusal(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                      const std::string& relay,
                                      const protocol::RelayRefusalGroup& g) {
  GPUWERK_ASSIGN_OR_RETURN(const RefusalParties parties, CheckRefusalParties(tx, g));
  // The user name was escaped once, by the relay that read it (relay/internal/client_login.cc,
  // docs/ssh.md "Outside text"): kept as it is when it is in that form, escaped here only when a
  // caller passed other text.
  const std::string user = core::IsBoundedPrintable(g.user) ? g.user : Text(g.user);
  nlohmann::json detail = {{"code", Text(g.code)},
                           {"user", user},
                           {"key_fingerprint", Text(g.key_fingerprint)},
                           {"count", g.count},
                           {"first_at", Text(g.first_at)},
                           {"last_at", Text(g.last_at)},
                           {"relay", relay}};
  detail.update(parties.claimed);
  GPUWERK_TRY(audit::RecordAudit(tx, clock, rng,
                                 {.actor_id = parties.actor_id,
                                  .action = "relay_session.refused",
                                  .target = parties.target,
                                  .source_address = Text(g.source_address),
                                  .detail = detail}));
  if (g.code != "upstream_host_key_mismatch") return {};
  // The instance's sshd is not the one pinned: the operator must look (docs/ssh.md "Host key
  // pinning").
  nlohmann::json mismatch = {{"expected", Text(g.expected_host_key)},
                             {"presented", Text(g.presented_host_key)},
                             {"key_fingerprint", Text(g.key_fingerprint)},
                             {"count", g.count},
                             {"relay", relay}};
  mismatch.update(parties.claimed);
  return audit::RecordAudit(tx, clock, rng,
                            {.actor_id = parties.actor_id,
                             .action = "relay.host_key_mismatch",
                             .target = parties.target,
                             .source_address = Text(g.source_address),
                             .detail = mismatch});
}

core::Result<void> RecordDroppedRelayRefusals(store::Transaction& tx, core::Clock& clock,
                                              core::Rng& rng, const std::string& relay,
                                              int64_t dropped) {
  if (dropped <= 0) return {};
  return audit::RecordAudit(tx, clock, rng,
                            {.actor_id = "",
                             .action = "relay_session.refusals_dropped",
                             .target = relay,
                             .source_address = "system",
                             .detail = {{"count", dropped}}});
}

}  // namespace gpuwerk::access
