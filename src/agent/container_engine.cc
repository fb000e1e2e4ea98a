#include "agent/container_engine.h"

#include <algorithm>
#include <array>
#include <thread>
#include <utility>

namespace gpuwerk::agent {

ContainerState ParseContainerState(std::string_view engine_state) {
  // Docker's states (API v1.41 ContainerState.Status) and podman's libpod states, which its
  // compatible service passes through in a few places. Exact matches only: an unknown string
  // is kUnknown, never the nearest guess.
  static constexpr std::array<std::pair<std::string_view, ContainerState>, 11> kStates = {{
      {"created", ContainerState::kCreated},
      {"configured", ContainerState::kCreated},
      {"initialized", ContainerState::kCreated},
      {"running", ContainerState::kRunning},
      {"restarting", ContainerState::kRestarting},
      {"paused", ContainerState::kPaused},
      {"exited", ContainerState::kExited},
      {"stopped", ContainerState::kExited},
      // On its way down: sshd is stopping and no login will work; Docker never sends it.
      {"stopping", ContainerState::kExited},
      {"dead", ContainerState::kDead},
      {"removing", ContainerState::kRemoving},
  }};
  for (const auto& [name, state] : kStates) {
    if (name == engine_state) return state;
  }
  return ContainerState::kUnknown;
}

std::string_view ContainerStateName(ContainerState state) {
  switch (state) {
    case ContainerState::kCreated:
      return "created";
    case ContainerState::kRunning:
      return "running";
    case ContainerState::kRestarting:
      return "restarting";
    case ContainerState::kPaused:
      return "paused";
    case ContainerState::kExited:
      return "exited";
    case ContainerState::kDead:
      return "dead";
    case ContainerState::kRemoving:
      return "removing";
    case ContainerState::kUnknown:
      return "unknown";
  }
  return "unknown";
}

core::Result<ExecResult> ContainerEngine::RunExec(std::string_view id, const ExecSpec& spec,
                                                  Timeout timeout) {
  using Clock = std::chrono::steady_clock;
  const Timeout total = timeout.count() > 0 ? timeout : Timeout(std::chrono::seconds(10));
  const auto deadline = Clock::now() + total;
  // What is left of the whole budget, at least 1 ms (0 would mean "the default" to a call).
  auto left = [&] {
    return std::max(Timeout(1), std::chrono::duration_cast<Timeout>(deadline - Clock::now()));
  };
  GPUWERK_ASSIGN_OR_RETURN(std::string exec_id, CreateExec(id, spec, left()));
  GPUWERK_ASSIGN_OR_RETURN(ExecOutput output, StartExec(exec_id, left()));
  while (true) {
    GPUWERK_ASSIGN_OR_RETURN(ExecInfo info, InspectExec(exec_id, left()));
    if (!info.running && info.exit_code >= 0) {
      return ExecResult{
          .exit_code = info.exit_code, .out = std::move(output.out), .err = std::move(output.err)};
    }
    if (Clock::now() >= deadline) {
      return core::Fail(core::ErrorCode::kDeadlineExceeded, "engine_timeout",
                        "the container engine had no exit status for the command within " +
                            std::to_string(total.count()) + " ms");
    }
    std::this_thread::sleep_for(std::min(Timeout(20), left()));
  }
}

}  // namespace gpuwerk::agent
