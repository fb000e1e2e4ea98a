#pragma once

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store {

/// What leader-only work asks before it acts (docs/scale-out.md "Leader-only work").
/// Implementations are thread-safe.
class LeaderFence {
 public:
  virtual ~LeaderFence() = default;
  /// Whether this process believes it holds the lease now, from its last successful renewal and
  /// its own monotonic clock (no store access; cheap). A worker skips its pass when false.
  virtual bool Holding() const = 0;
  /// Succeeds when this process holds the lease now at the epoch it last took, checked in `tx` on
  /// the database (LeaderLease::Check); else kFailedPrecondition "not_leader" and the caller's
  /// transaction must roll back. Errors: that, and the store's.
  virtual core::Result<void> Check(Transaction& tx) const = 0;
};

}  // namespace gpuwerk::store
