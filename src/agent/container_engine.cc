#include "agent/container_engine.h"

#include <algorithm>
#include <array>
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

}  // namespace gpuwerk::agent
