#include "sched/idempotency_key_table.h"

namespace gpuwerk::sched {

core::Result<std::optional<IdempotencyRecord>> IdempotencyKeyTable::FindSince(
    store::Transaction& tx, const std::string& person_id, const std::string& key, int64_t since) {
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           tx.QueryOne("SELECT request_hash, status, response, created_at FROM "
                                       "idempotency_keys WHERE person_id = ? AND idem_key = ? AND "
                                       "created_at > ?",
                                       {person_id, key, since}));
  if (!row) return std::optional<IdempotencyRecord>();
  return std::optional<IdempotencyRecord>(
      IdempotencyRecord{.request_hash = row->Text("request_hash"),
                        .status = static_cast<int>(row->Int("status")),
                        .response = row->Text("response"),
                        .created_at = row->Int("created_at")});
}

core::Result<void> IdempotencyKeyTable::Replace(store::Transaction& tx,
                                                const std::string& person_id,
                                                const std::string& key,
                                                const IdempotencyRecord& record) {
  GPUWERK_TRY(tx.Exec("DELETE FROM idempotency_keys WHERE person_id = ? AND idem_key = ?",
                      {person_id, key}));
  GPUWERK_TRY(
      tx.Exec("INSERT INTO idempotency_keys (person_id, idem_key, request_hash, status, response, "
              "created_at) VALUES (?, ?, ?, ?, ?, ?)",
              {person_id, key, record.request_hash, int64_t{record.status}, record.response,
               record.created_at}));
  return {};
}

core::Result<int64_t> IdempotencyKeyTable::PurgeUntil(store::Transaction& tx, int64_t before) {
  return tx.Exec("DELETE FROM idempotency_keys WHERE created_at <= ?", {before});
}

}  // namespace gpuwerk::sched
