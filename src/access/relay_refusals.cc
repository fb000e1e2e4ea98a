#include "access/relay_refusals.h"

#include "audit/audit_log.h"
#include "core/strings.h"

namespace gpuwerk::access {

core::Result<void> RecordRelayRefusal(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                      const std::string& relay,
                                      const protocol::RelayRefusalGroup& g) {
  const auto text = [](const std::string& s) { return core::BoundedPrintable(s); };
  GPUWERK_TRY(audit::RecordAudit(tx, clock, rng,
                                 {.actor_id = g.person_id,
                                  .action = "relay_session.refused",
                                  .target = g.instance_id,
                                  .source_address = text(g.source_address),
                                  .detail = {{"code", text(g.code)},
                                             {"user", text(g.user)},
                                             {"key_fingerprint", text(g.key_fingerprint)},
                                             {"count", g.count},
                                             {"first_at", text(g.first_at)},
                                             {"last_at", text(g.last_at)},
                                             {"relay", relay}}}));
  if (g.code != "upstream_host_key_mismatch") return {};
  // The instance's sshd is not the one pinned: the operator must look (docs/ssh.md "Host key
  // pinning").
  return audit::RecordAudit(tx, clock, rng,
                            {.actor_id = g.person_id,
                             .action = "relay.host_key_mismatch",
                             .target = g.instance_id,
                             .source_address = text(g.source_address),
                             .detail = {{"expected", text(g.expected_host_key)},
                                        {"presented", text(g.presented_host_key)},
                                        {"key_fingerprint", text(g.key_fingerprint)},
                                        {"count", g.count},
                                        {"relay", relay}}});
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
