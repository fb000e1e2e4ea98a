#pragma once

#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// A stored answer to an idempotent create (an instance create or a queue join).
struct IdempotencyRecord {
  std::string request_hash;  ///< what the request is recognised by
  int status = 0;            ///< the HTTP status answered
  std::string response;      ///< the JSON body answered
  int64_t created_at = 0;    ///< Unix seconds
};

/// The `idempotency_keys` table (migration 4): answers to `Idempotency-Key` creates, stored in
/// the transaction of the create they report (api/idempotency.h holds the HTTP side). Every
/// function works inside the caller's transaction; errors are the store's. Stateless.
class IdempotencyKeyTable {
 public:
  IdempotencyKeyTable() = delete;

  /// The record of (`person_id`, `key`) created after `since` (Unix seconds); nullopt when none.
  static core::Result<std::optional<IdempotencyRecord>> FindSince(store::Transaction& tx,
                                                                  const std::string& person_id,
                                                                  const std::string& key,
                                                                  int64_t since);
  /// Stores `record` for (`person_id`, `key`) in place of any older one.
  static core::Result<void> Replace(store::Transaction& tx, const std::string& person_id,
                                    const std::string& key, const IdempotencyRecord& record);
  /// Deletes the records created at or before `before`. Returns how many.
  static core::Result<int64_t> PurgeUntil(store::Transaction& tx, int64_t before);
};

}  // namespace gpuwerk::sched
