#pragma once

// The `host_pairs` and `host_pair_members` tables (migration 5, R-7, R-8): two hosts of a
// 2-host GPU type linked by a rail. Not for use outside src/sched/.

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "sched/host_registry.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// The `host_pairs` and `host_pair_members` tables' SQL, inside the caller's transaction;
/// errors are the store's. Stateless.
class HostPairTable {
 public:
  HostPairTable() = delete;

  /// Pair `id` with its members (node 0 first) and the instance placed on it; nullopt when
  /// absent.
  static core::Result<std::optional<HostPair>> Load(store::Transaction& tx, const std::string& id);
  /// The pair host `host_id` belongs to; nullopt when unpaired.
  static core::Result<std::optional<std::string>> PairOfHost(store::Transaction& tx,
                                                             const std::string& host_id);
  /// The ids of the pairs, oldest first: `limit` from `offset` on.
  static core::Result<std::vector<std::string>> ListIds(store::Transaction& tx, int64_t limit,
                                                        int64_t offset);
  /// How many pairs there are.
  static core::Result<int64_t> Count(store::Transaction& tx);
  /// Links `host_ids[0]` (node 0) and `host_ids[1]` with their rail addresses as pair `id`.
  static core::Result<void> Insert(store::Transaction& tx, const std::string& id,
                                   int64_t created_at, const std::vector<std::string>& host_ids,
                                   const std::vector<std::string>& rail_addresses);
  /// Unlinks pair `id` (its members go with it).
  static core::Result<void> Delete(store::Transaction& tx, const std::string& id);
};

}  // namespace gpuwerk::sched::internal
