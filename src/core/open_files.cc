#include "core/open_files.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace gpuwerk::core {
namespace {

uint64_t FromRlim(rlim_t value) {
  return value == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(value);
}

/// The kernel's ceiling for RLIMIT_NOFILE (fs.nr_open); 1048576 (its default) when unreadable.
uint64_t KernelNrOpen() {
  std::ifstream in("/proc/sys/fs/nr_open");
  uint64_t value = 0;
  if (in >> value && value > 0) return value;
  return 1048576;
}

}  // namespace

Result<OpenFileLimit> RaiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return Fail(ErrorCode::kInternal, "open_file_limit",
                std::string("getrlimit(RLIMIT_NOFILE) failed: ") + std::strerror(errno));
  }
  OpenFileLimit out{.soft_before = FromRlim(limit.rlim_cur),
                    .soft = FromRlim(limit.rlim_cur),
                    .hard = FromRlim(limit.rlim_max)};
  rlim_t target = limit.rlim_max;
  if (target == RLIM_INFINITY || FromRlim(target) > KernelNrOpen()) {
    target = static_cast<rlim_t>(KernelNrOpen());
  }
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < target) {
    rlimit raised = limit;
    raised.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      return Fail(ErrorCode::kInternal, "open_file_limit",
                  "setrlimit(RLIMIT_NOFILE) to " + std::to_string(target) +
                      " failed: " + std::strerror(errno));
    }
    out.soft = FromRlim(target);
  }
  return out;
}

uint64_t OpenFileSoftLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  return FromRlim(limit.rlim_cur);
}

size_t DefaultMaxConnections(uint64_t fd_limit) {
  if (fd_limit == UINT64_MAX) fd_limit = 1048576;
  if (fd_limit <= 256) return static_cast<size_t>(std::max<uint64_t>(1, fd_limit / 2));
  const uint64_t spare = std::max<uint64_t>(128, fd_limit / 4);
  return static_cast<size_t>(fd_limit - spare);
}

}  // namespace gpuwerk::core
