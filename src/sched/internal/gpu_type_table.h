#pragma once

// The `gpu_types` table (migration 2, R-7): the operator's sellable shapes. Not for use outside
// src/sched/.

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/host_registry.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// The `gpu_types` table's SQL, inside the caller's transaction; errors are the store's.
class GpuTypeTable {
 public:
  GpuTypeTable() = delete;

  /// Type `name`; nullopt when there is none.
  static core::Result<std::optional<GpuTypeConfig>> Find(store::Transaction& tx,
                                                         const std::string& name);
  /// Every type, by name: `limit` from `offset` on; `limit` < 0 means all.
  static core::Result<std::vector<GpuTypeConfig>> List(store::Transaction& tx, int64_t limit = -1,
                                                       int64_t offset = 0);
  /// How many types there are.
  static core::Result<int64_t> Count(store::Transaction& tx);
  static core::Result<void> Insert(store::Transaction& tx, const GpuTypeConfig& type);
  /// Stores every field of `type` (found by its name).
  static core::Result<void> Update(store::Transaction& tx, const GpuTypeConfig& type);
};

}  // namespace gpuwerk::sched::internal
