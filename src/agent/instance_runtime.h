#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/container_engine.h"
#include "core/error.h"

namespace gpuwerk::agent {

/// How the agent lets a Docker daemon run inside an instance (rule R-21, the host's
/// `--docker-inside`; docs/docker-inside.md says what each mode lets a person reach).
enum class DockerInside {
  /// Docker is in the image but its daemon cannot run: the container keeps the minimal
  /// capability set (kInstanceCapabilities) and the image's start script does not start it.
  kOff,
  /// The container runs under the Sysbox runtime (`HostConfig.Runtime` kSysboxRuntime, installed
  /// by the operator): nested containers in a user namespace, without host privileges.
  kSysbox,
  /// `HostConfig.Privileged`: root in the instance is root on the host. Only for hosts given to
  /// one tenant at a time.
  kPrivileged,
};

/// The Sysbox runtime's name as Docker knows it once Sysbox is installed (nestybox/sysbox).
inline constexpr std::string_view kSysboxRuntime = "sysbox-runc";

/// /dev/shm's size when the host configuration leaves it automatic (0), bytes: 16 GiB, or half
/// the host's memory where that is less. Docker's own 64 MiB breaks NCCL's shared-memory
/// transport and PyTorch data loaders; /dev/shm is a tmpfs whose pages count against the
/// container's memory limit only when written, so the size is a ceiling, not a reservation.
inline constexpr int64_t kDefaultShmBytes = int64_t{16} << 30;

/// The least /dev/shm size the agent accepts, bytes: Docker's default, 64 MiB.
inline constexpr int64_t kMinShmBytes = int64_t{64} << 20;

/// "off", "sysbox" or "privileged". Errors: kInvalidArgument "invalid_config" naming the allowed
/// values and quoting (escaped, bounded) what was given.
core::Result<DockerInside> ParseDockerInside(std::string_view text);

/// The mode's name as ParseDockerInside takes it.
std::string_view DockerInsideName(DockerInside mode);

/// What every instance container of a host gets besides its limits (InstanceLimits): the Docker
/// inside mode, /dev/shm's size and memlock.
struct InstanceRuntime {
  DockerInside docker_inside = DockerInside::kOff;
  /// `HostConfig.ShmSize`, bytes.
  int64_t shm_bytes = kDefaultShmBytes;
  /// Whether containers get memlock unlimited (`HostConfig.Ulimits` memlock -1:-1).
  /// ResolveInstanceRuntime sets it where the host's processes may raise a resource limit
  /// (ProcessCanRaiseLimits); elsewhere the engine would fail every start, so its default applies
  /// and the inventory says so. Default false: a default-constructed runtime asks the engine for
  /// no ulimit.
  bool memlock_unlimited = false;
};

/// Whether this process may raise resource limits above its own hard limits: CAP_SYS_RESOURCE in
/// its effective set (/proc/self/status CapEff), or memlock's hard limit already unlimited. A
/// root agent on a GPU host has it; a sandbox without CAP_SYS_RESOURCE (this project's build
/// VMs) does not, and neither does the engine it starts, which then refuses a container asking
/// for more ("error setting rlimit … operation not permitted"). Podman's API also drops its
/// configured default_ulimits once a create names any ulimit, so nothing is sent there.
bool ProcessCanRaiseLimits();

/// Resolves the host configuration (`docker_inside`, `instance_shm_bytes`, 0: automatic, see
/// kDefaultShmBytes) against a host with
/// `host_memory_bytes` of memory (0: unknown, not checked) whose processes may raise resource
/// limits or not (`can_raise_limits`, ProcessCanRaiseLimits: memlock_unlimited). Errors:
/// kInvalidArgument "invalid_config": an unknown mode (ParseDockerInside), a /dev/shm size below
/// kMinShmBytes or above the host's memory.
core::Result<InstanceRuntime> ResolveInstanceRuntime(std::string_view docker_inside,
                                                     int64_t shm_bytes, uint64_t host_memory_bytes,
                                                     bool can_raise_limits = true);

/// The inner Docker daemon's configuration (`/etc/docker/daemon.json`, Docker's dockerd(8)
/// configuration file format), one line of JSON: on a host with a GPU (`gpu`) the NVIDIA
/// container runtime is registered as runtime "nvidia" (`runtimes.nvidia.path`
/// "nvidia-container-runtime", the NVIDIA Container Toolkit's binary, which the instance image
/// must carry), so that `docker run --runtime nvidia -e NVIDIA_VISIBLE_DEVICES=all …` works
/// inside; without a GPU no runtime is added ("{}").
std::string InnerDockerdConfig(bool gpu);

/// The environment variable that carries the mode to the image's start script
/// (scripts/instance-image/files/gpuwerk-init): "off", "sysbox" or "privileged".
inline constexpr std::string_view kDockerInsideEnv = "GPUWERK_DOCKER_INSIDE";
/// The environment variable that carries InnerDockerdConfig to the start script, which writes it
/// to /etc/docker/daemon.json when that file does not exist yet. Set only when the mode is not
/// off.
inline constexpr std::string_view kDockerdConfigEnv = "GPUWERK_DOCKERD_CONFIG";

/// Where the inner daemon keeps images and containers: an anonymous volume, so that its overlay
/// storage sits on the engine's filesystem rather than on the container's own overlay (overlayfs
/// does not stack), and goes with the container. Only when the mode is not off.
inline constexpr std::string_view kInnerDockerDataDir = "/var/lib/docker";

/// Applies `runtime` to `spec` (after its `gpu` is decided): /dev/shm's size
/// (`shm_size_bytes`), memlock unlimited when `memlock_unlimited` (`ulimits` {"memlock", -1, -1}:
/// RDMA registers pinned memory; sessions through sshd inherit it from sshd), the mode's
/// environment entries (kDockerInsideEnv; kDockerdConfigEnv with InnerDockerdConfig(spec.gpu)
/// when not off), and for the modes: kSysbox sets `runtime` kSysboxRuntime (which takes the place
/// of the nvidia runtime: Sysbox does not pass GPUs through) and clears `no_new_privileges`
/// (nested containers run setuid programs); kPrivileged sets `privileged`. Either adds the
/// kInnerDockerDataDir volume.
void ApplyInstanceRuntime(const InstanceRuntime& runtime, ContainerSpec& spec);

/// The sentences the agent adds to its inventory's `limits.not_enforced` about `runtime`, so that
/// operators see them in the host listing: for a privileged host "docker inside: privileged: a
/// person in an instance on this host is root on the host; …".
std::vector<std::string> InstanceRuntimeWarnings(const InstanceRuntime& runtime);

/// The sentence the commands that resolve a runtime without memlock (ResolveInstanceRuntime with
/// `can_raise_limits` false) put in the host's `InstanceLimits::not_enforced`.
inline constexpr std::string_view kMemlockNotRaised =
    "memlock: not raised to unlimited: this host's processes lack CAP_SYS_RESOURCE, so instances "
    "keep the engine's default locked-memory limit (RDMA may fail)";

}  // namespace gpuwerk::agent
