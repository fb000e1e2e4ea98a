#pragma once

// The `observed_containers` table (migration 2): what each host's agent last reported for each
// node it runs. Not for use outside src/sched/.

#include <optional>
#include <string>

#include "core/error.h"
#include "sched/agent_sync.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// The `observed_containers` table's SQL, inside the caller's transaction; errors are the
/// store's. Stateless.
class ObservedContainerTable {
 public:
  ObservedContainerTable() = delete;

  /// Stores `c` as host `host_id` reported it at `observed_at` (Unix seconds), in place of what
  /// was observed for its node before.
  static core::Result<void> Replace(store::Transaction& tx, const ContainerReport& c,
                                    const std::string& host_id, int64_t observed_at);
  /// The `error` last stored for node `node_index` of `instance_id`; nullopt when none is.
  static core::Result<std::optional<std::string>> ErrorOf(store::Transaction& tx,
                                                          const std::string& instance_id,
                                                          int64_t node_index);
  /// Forgets every node of the instance.
  static core::Result<void> DeleteOf(store::Transaction& tx, const std::string& instance_id);
  /// Forgets one node as host `host_id` reported it.
  static core::Result<void> DeleteNode(store::Transaction& tx, const std::string& instance_id,
                                       int64_t node_index, const std::string& host_id);
  /// Forgets everything host `host_id` reported.
  static core::Result<void> DeleteOnHost(store::Transaction& tx, const std::string& host_id);
};

}  // namespace gpuwerk::sched::internal
