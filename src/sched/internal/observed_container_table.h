#pragma once

// The `observed_containers` table (migration 2): what each host's agent last reported for each
// node it runs. Not for use outside src/sched/.

#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// One container as its host's agent reported it (docs/agent-protocol.md), already bounded.
struct ObservedContainer {
  std::string instance_id;
  int64_t node_index = 0;
  std::string host_id;
  std::string container_id;
  std::string state;  ///< engine state: created, running, restarting, exited, dead, …
  int64_t exit_code = 0;
  std::string started_at;
  int64_t ssh_port = 0;
  bool ssh_ready = false;
  int64_t restart_generation = 0;
  std::string error;
  int64_t observed_at = 0;  ///< Unix seconds
};

/// The `observed_containers` table's SQL, inside the caller's transaction; errors are the
/// store's. Stateless.
class ObservedContainerTable {
 public:
  ObservedContainerTable() = delete;

  /// Stores `c` in place of what was observed for its node before.
  static core::Result<void> Replace(store::Transaction& tx, const ObservedContainer& c);
  /// Forgets every node of the instance.
  static core::Result<void> DeleteOf(store::Transaction& tx, const std::string& instance_id);
  /// Forgets one node as host `host_id` reported it.
  static core::Result<void> DeleteNode(store::Transaction& tx, const std::string& instance_id,
                                       int64_t node_index, const std::string& host_id);
  /// Forgets everything host `host_id` reported.
  static core::Result<void> DeleteOnHost(store::Transaction& tx, const std::string& host_id);
};

}  // namespace gpuwerk::sched::internal
