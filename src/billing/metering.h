#pragma once

// Metering on evidence (R-13, docs/billing.md "Evidence"): what a billing session bills, from
// the sightings of its instance's host. The rules are pure functions (tests pass the times);
// RecordSighting applies one to the store inside the caller's (the agent sync's) transaction.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "billing/billing_session_table.h"
#include "billing/money.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// One sync round of the host that holds a session's node 0, as billing needs it.
struct Sighting {
  int64_t now = 0;                  ///< when the agent reported (Unix seconds)
  bool container_reported = false;  ///< node 0's container was in the report
  std::string container_started;    ///< its start time as the engine sent it
  bool container_running = false;   ///< its engine state is "running"
  /// Its last finish time as the engine sent it ("" or Docker's year 1 when unknown; an agent that
  /// does not send it leaves it "").
  std::string container_finished;
};

/// The evidence kept with a session (BillingSessionRow::evidence_at, evidence_container_started).
struct Evidence {
  int64_t at = 0;
  std::string container_started;
  bool operator==(const Evidence&) const = default;
};

/// What one sighting changes: the new evidence and the unbilled gap, if any.
struct EvidenceStep {
  Evidence next;
  std::optional<Segment> gap;  ///< [from, to) not billed
};

/// The rule. A sighting within `silent_after` seconds of the last one changes nothing billed. After
/// a longer silence (the host was `unknown`), the silence [last, now) is billed only as far as the
/// container is known to have run through it:
/// - the same container start time as at the last sighting and running now: it ran through, the
///   whole silence is billed (killing the agent does not stop the meter);
/// - the same start time, not running: billed up to its finish time (when reported and within the
///   silence), else up to the last sighting;
/// - another start time (or no container): the old run is billed up to its finish time when that is
///   known and within the silence (Docker keeps the previous run's finish time across a restart),
///   else up to the last sighting; billing resumes at the new container's start when that is within
///   the silence, else now.
/// A session that ended (`ended_at`) during the silence has the gap cut at its end.
EvidenceStep NextEvidence(const Evidence& prev, const Sighting& s, int64_t silent_after,
                          std::optional<int64_t> ended_at = std::nullopt);

/// The billed wall time of `session` as known at `now`: [started_at, end) less its `gaps`, where
/// end is ended_at (or `now` while active), except that when end is more than `silent_after`
/// seconds after the last evidence (its host is silent, or was silent when it ended and has not
/// come back) billing stops at the last evidence. Sorted, not overlapping; may be empty.
std::vector<Segment> BilledSegments(const BillingSessionRow& session,
                                    const std::vector<Segment>& gaps, int64_t now,
                                    int64_t silent_after);

/// Billed seconds of `segments`.
int64_t BilledSeconds(const std::vector<Segment>& segments);

/// Applies a sighting to session `session_id` (NextEvidence: evidence stored, a gap recorded).
/// Missing sessions are ignored. Errors: the store's.
core::Result<void> RecordSighting(store::Transaction& tx, const std::string& session_id,
                                  const Sighting& sighting, int64_t silent_after);

}  // namespace gpuwerk::billing
