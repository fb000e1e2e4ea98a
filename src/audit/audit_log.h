#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

/// An audit event as stored, for the operator's reading (GET /api/v1/admin/audit).
struct AuditRecord {
  std::string id;        ///< "aud_…"
  int64_t at = 0;        ///< Unix seconds
  std::string actor_id;  ///< "" for the system or an anonymous caller
  std::string action;
  std::string target;
  std::string source_address;
  nlohmann::json detail = nlohmann::json::object();
};

/// Which events ListAuditEvents returns: each non-empty field must match exactly.
struct AuditFilter {
  std::string actor_id;  ///< a person id
  std::string target;    ///< what was acted on, e.g. a team's id
};

/// One page of audit events, newest first.
struct AuditPage {
  std::vector<AuditRecord> items;
  int64_t page = 1;   ///< 1-based
  int64_t pages = 1;  ///< at least 1
  int64_t total = 0;  ///< events matching the filter
};

/// Audit events per page (the API's 15 rows).
inline constexpr int64_t kAuditPageSize = 15;

/// The events matching `filter`, newest first (at, then id, both descending: a stable order),
/// `kAuditPageSize` a page; `page` is 1-based. Uses the indexes audit_events_by_actor /
/// audit_events_by_target. Errors: kInvalidArgument "invalid_page" for page < 1; the store's.
core::Result<AuditPage> ListAuditEvents(store::Transaction& tx, const AuditFilter& filter,
                                        int64_t page);

}  // namespace gpuwerk::audit
