#pragma once

// The `billing_sessions` table (migration 2, R-13): one instance's metered life. Kept in sched
// until a billing module owns it. Not for use outside src/sched/.

#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// A billing session as opened at launch; the price is copied from the GPU type then.
struct BillingSessionRow {
  std::string id;  ///< "bil_…"
  std::string instance_id;
  std::string person_id;
  std::string instance_name;
  std::string gpu_type;
  int64_t price_minor_per_hour = 0;
  std::string currency;
  int64_t started_at = 0;  ///< Unix seconds
};

/// The `billing_sessions` table's SQL, inside the caller's transaction; errors are the store's.
class BillingSessionTable {
 public:
  BillingSessionTable() = delete;

  /// Opens a session.
  static core::Result<void> Insert(store::Transaction& tx, const BillingSessionRow& row);
  /// Ends session `id` at `now` unless it has ended already.
  static core::Result<void> End(store::Transaction& tx, const std::string& id, int64_t now);
  /// When session `id` started (Unix seconds); nullopt when there is no such session.
  static core::Result<std::optional<int64_t>> StartedAt(store::Transaction& tx,
                                                        const std::string& id);
};

}  // namespace gpuwerk::sched::internal
