#include "cli/internal/launch_wait.h"

#include <cstdio>
#include <thread>

#include "cli/output.h"

namespace gpuwerk::cli::internal {

using core::ErrorCode;
using nlohmann::json;
using Steady = std::chrono::steady_clock;

std::string LaunchStep(const json& instance) {
  const std::string status = Str(instance, "status");
  std::string hosts;
  for (const auto& h : Field(instance, "hosts")) {
    if (h.is_string()) hosts += (hosts.empty() ? "" : ", ") + h.get<std::string>();
  }
  std::string step;
  if (status == "provisioning" && hosts.empty()) {
    step = "waiting for a host";
  } else if (status == "provisioning" && Str(instance, "ssh_command").empty()) {
    step = "placed on " + hosts + "; creating the container";
  } else if (status == "provisioning") {
    step = "container created on " + hosts + "; waiting for sshd";
  } else if (status == "restarting") {
    step = "restarting the container on " + hosts;
  } else if (status == "running") {
    step = "sshd ready: running";
  } else {
    step = status;
  }
  if (const std::string reason = Str(instance, "status_reason"); !reason.empty()) {
    step += " (" + reason + ")";
  }
  return SafeText(step);
}

core::Result<json> WaitUntilRunning(VerbContext& ctx, const ServerConnection& server,
                                    const json& instance, WaitLimits limits) {
  auto now = [&ctx] { return ctx.io.now ? ctx.io.now() : Steady::now(); };
  auto sleep = [&ctx](std::chrono::milliseconds d) {
    if (ctx.io.sleep) {
      ctx.io.sleep(d);
    } else {
      std::this_thread::sleep_for(d);
    }
  };
  std::ostream& progress = ctx.common.json ? *ctx.io.err : *ctx.io.out;
  const std::string name = Str(instance, "name");
  const std::string path = "/api/v1/instances/" + PathEscape(Str(instance, "id"));
  const Steady::time_point start = now();
  std::string last_step;
  json in = instance;
  while (true) {
    const std::string step = LaunchStep(in);
    if (step != last_step) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(now() - start);
      char stamp[32];
      std::snprintf(stamp, sizeof stamp, "[%4llds] ", static_cast<long long>(elapsed.count()));
      progress << stamp << step << "\n";
      progress.flush();
      last_step = step;
    }
    const std::string status = Str(in, "status");
    if (status == "running") return in;
    if (status == "failed") {
      return core::Fail(ErrorCode::kFailedPrecondition, "instance_failed",
                        "instance " + name + " failed: " + Str(in, "status_reason") +
                            "; delete it with 'gpuwerk instances rm " + name + "'");
    }
    if (status == "exited") {
      return core::Fail(ErrorCode::kFailedPrecondition, "instance_exited",
                        "the container of instance " + name +
                            " exited; see 'gpuwerk instances show " + name +
                            "', restart it with 'gpuwerk instances restart " + name + "'");
    }
    if (status == "deleting" || status == "deleted") {
      return core::Fail(ErrorCode::kFailedPrecondition, "instance_deleted",
                        "instance " + name + " is being deleted");
    }
    if (now() - start >= limits.timeout) {
      return core::Fail(ErrorCode::kDeadlineExceeded, "wait_timeout",
                        "instance " + name + " is not running after " +
                            std::to_string(limits.timeout.count()) + " s (" + last_step +
                            "); it may still start: follow it with 'gpuwerk instances show " +
                            name + "' or 'gpuwerk events'");
    }
    sleep(limits.poll);
    auto next = server.Ok("GET", path);
    if (!next && next.error().api_code == "not_found") {
      return core::Fail(ErrorCode::kFailedPrecondition, "instance_deleted",
                        "instance " + name + " was deleted while starting");
    }
    if (!next) return core::Fail(next.error());
    in = std::move(*next);
  }
}

}  // namespace gpuwerk::cli::internal
