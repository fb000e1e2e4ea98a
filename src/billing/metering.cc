#include "billing/metering.h"

#include <algorithm>

namespace gpuwerk::billing {

EvidenceStep NextEvidence(const Evidence& prev, const Sighting& s, int64_t silent_after,
                          std::optional<int64_t> ended_at) {
  EvidenceStep step;
  step.next.at = std::max(prev.at, s.now);
  step.next.container_started = s.container_reported ? s.container_started : prev.container_started;
  if (s.now - prev.at <= silent_after) return step;  // not silent: nothing changes
  const int64_t silence_from = prev.at, silence_to = s.now;
  const bool same_run = s.container_reported && !s.container_started.empty() &&
                        s.container_started == prev.container_started;
  if (same_run && s.container_running) return step;  // it ran through the silence
  // Billed up to the finish time of the run that was going at the last sighting when the engine
  // knows it and it lies in the silence; else up to the last sighting.
  int64_t gap_from = silence_from;
  if (s.container_reported) {
    if (auto finished = ParseEngineTime(s.container_finished); finished && *finished > gap_from) {
      gap_from = std::min(*finished, silence_to);
    }
  }
  // A new run that began in the silence is billed from its start.
  int64_t gap_to = silence_to;
  if (s.container_reported && !same_run) {
    if (auto started = ParseEngineTime(s.container_started);
        started && *started > gap_from && *started < silence_to) {
      gap_to = *started;
    }
  }
  if (ended_at) gap_to = std::min(gap_to, *ended_at);
  if (gap_from < gap_to) step.gap = Segment{.from = gap_from, .to = gap_to};
  return step;
}

std::vector<Segment> BilledSegments(const BillingSessionRow& session,
                                    const std::vector<Segment>& gaps, int64_t now,
                                    int64_t silent_after) {
  int64_t end = session.ended_at.value_or(now);
  if (end - session.evidence_at > silent_after)
    end = std::max(session.started_at, session.evidence_at);
  std::vector<Segment> out;
  int64_t from = session.started_at;
  for (const Segment& g : gaps) {
    if (g.to <= g.from || g.to <= from) continue;
    if (g.from >= end) break;
    if (g.from > from) out.push_back({.from = from, .to = g.from});
    from = std::max(from, g.to);
  }
  if (from < end) out.push_back({.from = from, .to = end});
  return out;
}

int64_t BilledSeconds(const std::vector<Segment>& segments) {
  int64_t total = 0;
  for (const Segment& s : segments) total += std::max<int64_t>(0, s.to - s.from);
  return total;
}

core::Result<void> RecordSighting(store::Transaction& tx, const std::string& session_id,
                                  const Sighting& sighting, int64_t silent_after) {
  GPUWERK_ASSIGN_OR_RETURN(auto session, BillingSessionTable::Find(tx, session_id));
  if (!session) return {};
  const EvidenceStep step = NextEvidence(
      {.at = session->evidence_at, .container_started = session->evidence_container_started},
      sighting, silent_after, session->ended_at);
  if (step.gap) GPUWERK_TRY(BillingSessionTable::AddGap(tx, session_id, *step.gap));
  if (step.next.at != session->evidence_at ||
      step.next.container_started != session->evidence_container_started) {
    GPUWERK_TRY(BillingSessionTable::SetEvidence(tx, session_id, step.next.at,
                                                 step.next.container_started));
  }
  return {};
}

}  // namespace gpuwerk::billing
