#include "sched/internal/billing_session_table.h"

namespace gpuwerk::sched::internal {

core::Result<void> BillingSessionTable::Insert(store::Transaction& tx,
                                               const BillingSessionRow& row) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO billing_sessions (id, instance_id, person_id, instance_name, gpu_type, "
              "price_minor_per_hour, currency, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
              {row.id, row.instance_id, row.person_id, row.instance_name, row.gpu_type,
               row.price_minor_per_hour, row.currency, row.started_at}));
  return {};
}

core::Result<void> BillingSessionTable::End(store::Transaction& tx, const std::string& id,
                                            int64_t now) {
  GPUWERK_TRY(tx.Exec("UPDATE billing_sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
                      {now, id}));
  return {};
}

core::Result<std::optional<int64_t>> BillingSessionTable::StartedAt(store::Transaction& tx,
                                                                    const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT started_at FROM billing_sessions WHERE id = ?", {id}));
  if (!row) return std::optional<int64_t>();
  return std::optional<int64_t>(row->Int("started_at"));
}

}  // namespace gpuwerk::sched::internal
