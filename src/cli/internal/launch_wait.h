#pragma once
// `instances create|restart --wait`: follows an instance's launch until it runs.

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/internal/verb_support.h"

namespace gpuwerk::cli::internal {

/// How long `--wait` waits, and how often it looks.
struct WaitLimits {
  std::chrono::seconds timeout{600};
  std::chrono::milliseconds poll{1000};
};

/// The step of a launch that `instance` (as GET /api/v1/instances/{id} shows it) is at, for
/// people: "placed on spark-a; creating the container", "container created on spark-a; waiting
/// for sshd", "sshd ready: running", or the status, each with the status reason when there is one.
std::string LaunchStep(const nlohmann::json& instance);

/// Looks at the instance `instance` (its `id`) every `limits.poll` until its status is `running`,
/// printing one line `[  12s] <LaunchStep>` whenever the step changes (on stdout; on stderr under
/// --json, whose stdout gets only the result). Sleeps and reads the time through `ctx.io`.
/// Returns the running instance. Errors: kFailedPrecondition "instance_failed" (status failed, with
/// the reason), "instance_exited" (its container exited), "instance_deleted" (deleting, or gone);
/// kDeadlineExceeded "wait_timeout" when it is not running after `limits.timeout` (the message
/// says where it stands and how to keep watching); the server's.
core::Result<nlohmann::json> WaitUntilRunning(VerbContext& ctx, const ServerConnection& server,
                                              const nlohmann::json& instance, WaitLimits limits);

}  // namespace gpuwerk::cli::internal
