#include "agent/instance_runtime.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/instance_limits.h"

namespace gpuwerk::agent {
namespace {

core::Error ConfigError(std::string message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_config", std::move(message));
}

/// `text` for a message: printable ASCII kept, the rest as \xNN, at most 40 characters.
std::string Quoted(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  if (text.size() > 40) out += "…";
  return out;
}

}  // namespace

core::Result<DockerInside> ParseDockerInside(std::string_view text) {
  if (text == "off") return DockerInside::kOff;
  if (text == "sysbox") return DockerInside::kSysbox;
  if (text == "privileged") return DockerInside::kPrivileged;
  return core::Fail(ConfigError(fmt::format(
      "docker_inside must be off, sysbox or privileged, not \"{}\" (docs/docker-inside.md)",
      Quoted(text))));
}

std::string_view DockerInsideName(DockerInside mode) {
  switch (mode) {
    case DockerInside::kOff:
      return "off";
    case DockerInside::kSysbox:
      return "sysbox";
    case DockerInside::kPrivileged:
      return "privileged";
  }
  return "off";
}

core::Result<InstanceRuntime> ResolveInstanceRuntime(std::string_view docker_inside,
                                                     int64_t shm_bytes, uint64_t host_memory_bytes,
                                                     bool can_raise_limits) {
  InstanceRuntime runtime;
  runtime.memlock_unlimited = can_raise_limits;
  GPUWERK_ASSIGN_OR_RETURN(runtime.docker_inside, ParseDockerInside(docker_inside));
  if (shm_bytes == 0) {
    shm_bytes = kDefaultShmBytes;
    if (host_memory_bytes > 0) {
      shm_bytes = std::min<int64_t>(shm_bytes, static_cast<int64_t>(host_memory_bytes / 2));
      shm_bytes = std::max(shm_bytes, kMinShmBytes);
    }
  }
  if (shm_bytes < kMinShmBytes) {
    return core::Fail(ConfigError(
        fmt::format("instance_shm_bytes must be 0 (automatic) or at least {} (64 MiB, Docker's "
                    "default), not {}",
                    kMinShmBytes, shm_bytes)));
  }
  if (host_memory_bytes > 0 && static_cast<uint64_t>(shm_bytes) > host_memory_bytes) {
    return core::Fail(ConfigError(
        fmt::format("instance_shm_bytes ({}) is more than this host's memory ({} bytes)", shm_bytes,
                    host_memory_bytes)));
  }
  runtime.shm_bytes = shm_bytes;
  return runtime;
}

std::string InnerDockerdConfig(bool gpu) {
  nlohmann::json config = nlohmann::json::object();
  if (gpu) {
    config["runtimes"] = {{"nvidia", {{"path", "nvidia-container-runtime"}}}};
  }
  return config.dump();
}

void ApplyInstanceRuntime(const InstanceRuntime& runtime, ContainerSpec& spec) {
  spec.shm_size_bytes = runtime.shm_bytes;
  if (runtime.memlock_unlimited) {
    spec.ulimits.push_back({.name = "memlock", .soft = -1, .hard = -1});
  }
  spec.env.push_back(
      fmt::format("{}={}", kDockerInsideEnv, DockerInsideName(runtime.docker_inside)));
  if (runtime.docker_inside == DockerInside::kOff) return;
  spec.env.push_back(fmt::format("{}={}", kDockerdConfigEnv, InnerDockerdConfig(spec.gpu)));
  spec.volumes.emplace_back(kInnerDockerDataDir);
  if (runtime.docker_inside == DockerInside::kSysbox) {
    spec.runtime = std::string(kSysboxRuntime);
    spec.no_new_privileges = false;
  } else {
    spec.privileged = true;
  }
}

std::vector<std::string> InstanceRuntimeWarnings(const InstanceRuntime& runtime) {
  std::vector<std::string> out;
  if (runtime.docker_inside == DockerInside::kPrivileged) {
    out.emplace_back(
        "docker inside: privileged: a person in an instance on this host is root on the host; "
        "give it to one tenant at a time and wipe it between tenants (docs/docker-inside.md)");
  }
  return out;
}

bool ProcessCanRaiseLimits() {
  rlimit memlock{};
  if (::getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 && memlock.rlim_max == RLIM_INFINITY) return true;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("CapEff:")) continue;
    const uint64_t eff = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (eff & CapabilityMask({"CAP_SYS_RESOURCE"})) != 0;
  }
  return false;
}

}  // namespace gpuwerk::agent
