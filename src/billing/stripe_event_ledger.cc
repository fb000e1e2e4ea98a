#include "billing/stripe_event_ledger.h"

namespace gpuwerk::billing {

core::Result<bool> StripeEventLedger::Seen(store::Transaction& tx, const std::string& event_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT 1 AS one FROM stripe_events WHERE id = ?", {event_id}));
  return row.has_value();
}

core::Result<void> StripeEventLedger::Record(store::Transaction& tx, const std::string& event_id,
                                             const std::string& type, int64_t created,
                                             int64_t now) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO stripe_events (id, type, created, applied_at) VALUES (?, ?, ?, ?)",
              {event_id, type, created, now}));
  return {};
}

core::Result<bool> StripeEventLedger::Advance(store::Transaction& tx, const std::string& aspect,
                                              int64_t created, const std::string& event_id,
                                              bool wins_ties) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT created FROM stripe_event_versions WHERE aspect = ?", {aspect}));
  if (row && (row->Int("created") > created || (!wins_ties && row->Int("created") == created))) {
    return false;
  }
  if (row) {
    GPUWERK_TRY(
        tx.Exec("UPDATE stripe_event_versions SET created = ?, event_id = ? WHERE aspect = ?",
                {created, event_id, aspect}));
  } else {
    GPUWERK_TRY(
        tx.Exec("INSERT INTO stripe_event_versions (aspect, created, event_id) VALUES (?, ?, ?)",
                {aspect, created, event_id}));
  }
  return true;
}

}  // namespace gpuwerk::billing
