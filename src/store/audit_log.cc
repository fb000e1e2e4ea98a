#include "store/audit_log.h"

namespace gpuwerk::store {

core::Result<void> RecordAudit(Transaction& tx, core::Clock& clock, core::Rng& rng,
                               const AuditEvent& event) {
  Value actor = event.actor_id.empty() ? Value(kNull) : Value(event.actor_id);
  GPUWERK_TRY(
      tx.Exec("INSERT INTO audit_events (id, at, actor_id, action, target, source_address, detail) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)",
              {core::NewId(rng, "aud"), clock.NowUnix(), actor, event.action, event.target,
               event.source_address, event.detail.dump()}));
  return {};
}

}  // namespace gpuwerk::store
