#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace gpuwerk::core {

/// The process's open-file limit (RLIMIT_NOFILE, getrlimit(2)) before and after
/// RaiseOpenFileLimit, in file descriptors.
struct OpenFileLimit {
  uint64_t soft_before = 0;  ///< the soft limit found at start
  uint64_t soft = 0;         ///< the soft limit now
  uint64_t hard = 0;         ///< the hard limit (RLIM_INFINITY shown as UINT64_MAX)
};

/// Raises RLIMIT_NOFILE's soft limit to its hard limit (but no higher than the kernel's
/// /proc/sys/fs/nr_open, which an "unlimited" hard limit cannot exceed), so that a server can
/// hold as many connections as the operator allowed. Never lowers it. Process-wide; call from
/// one thread at start.
/// Errors: kInternal "open_file_limit" when getrlimit or setrlimit fails (the message says
/// which, with strerror); the limit is then unchanged.
Result<OpenFileLimit> RaiseOpenFileLimit();

/// The current soft RLIMIT_NOFILE (UINT64_MAX for unlimited); 1024 when it cannot be read.
uint64_t OpenFileSoftLimit();

/// The default cap on open HTTP connections for a soft open-file limit of `fd_limit`: the limit
/// less a quarter, keeping at least 128 descriptors spare for the store, logs, outgoing
/// connections and the like (1024 → 768, 65536 → 49152); for a limit of 256 or less, half of
/// it, at least 1 (256 → 128). An unlimited (UINT64_MAX) limit counts as 1048576.
size_t DefaultMaxConnections(uint64_t fd_limit);

}  // namespace gpuwerk::core
