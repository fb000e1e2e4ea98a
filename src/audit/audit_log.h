#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::audit {

/// One audit event: who did what to what, when, from where.
struct AuditEvent {
  std::string actor_id;        ///< person id; "" for the system or an anonymous caller
  std::string action;          ///< dotted verb, e.g. "ssh_key.add", "person.sign_in"
  std::string target;          ///< what was acted on, e.g. "key_…" or "person_…"
  std::string source_address;  ///< the caller's IP address, or "system"
  nlohmann::json detail = nlohmann::json::object();  ///< extra facts; never secrets
};

/// Records `event` inside the caller's transaction, so the audit row commits or rolls back
/// with the change it describes. Errors: the store's.
core::Result<void> RecordAudit(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                               const AuditEvent& event);

}  // namespace gpuwerk::audit
