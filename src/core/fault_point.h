#pragma once

#include <string_view>

namespace gpuwerk::core {

/// A named crash point for fault-injection tests of process deaths at awkward moments (e.g.
/// between "the instance row is committed" and "the container exists"). When the environment
/// variable `GPUWERK_FAULT_POINTS` (read once, a comma-separated list of names) names `name`, the
/// process logs the point and kills itself with SIGKILL, exactly as `kill -9` would: no
/// destructors, no flush of anything but the log line. Otherwise it does nothing (one branch on
/// a cached flag). Never set the variable in production.
///
/// Points in the code base: `instance_row_written` (sched::InstanceService::Create, after the
/// create transaction committed, before the HTTP answer); `queue_instance_written` (inside a
/// queue drain's transaction, after the instance row, before the commit) and
/// `queue_drain_committed` (after the drain committed, before agents are told); see
/// docs/queue.md.
void FaultPoint(std::string_view name);

}  // namespace gpuwerk::core
