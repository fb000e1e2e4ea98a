#include "audit/audit_log.h"

namespace gpuwerk::audit {

core::Result<void> RecordAudit(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                               const AuditEvent& event) {
  store::Value actor =
      event.actor_id.empty() ? store::Value(store::kNull) : store::Value(event.actor_id);
  GPUWERK_TRY(
      tx.Exec("INSERT INTO audit_events (id, at, actor_id, action, target, source_address, detail) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)",
              {core::NewId(rng, "aud"), clock.NowUnix(), actor, event.action, event.target,
               event.source_address, event.detail.dump()}));
  return {};
}

}  // namespace gpuwerk::audit
