#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/instance_limits.h"
#include "core/error.h"

namespace gpuwerk::agent {

/// A container's state as the engine reports it (Docker Engine API v1.41, `State.Status` of
/// `GET /containers/{id}/json` and `State` of `GET /containers/json`). Every string an engine may
/// send maps to one of these explicitly (ParseContainerState); anything else is kUnknown, never a
/// guess (case C11).
enum class ContainerState {
  kCreated,     ///< created, never started ("created"; podman also "configured", "initialized")
  kRunning,     ///< its main process runs ("running")
  kRestarting,  ///< the engine is restarting it under its restart policy ("restarting")
  kPaused,      ///< frozen ("paused")
  kExited,      ///< its main process ended ("exited"; podman also "stopped", "stopping")
  kDead,        ///< the engine failed to remove or clean it up ("dead")
  kRemoving,    ///< being removed ("removing")
  kUnknown,     ///< a string this code does not know, or none
};

/// Maps an engine state string to a ContainerState: the Docker strings ("created", "running",
/// "restarting", "paused", "exited", "dead", "removing") and podman's own ("configured",
/// "initialized" → kCreated; "stopped", "stopping" → kExited). Exact, case-sensitive match;
/// anything else, including "" and "unknown", is kUnknown.
ContainerState ParseContainerState(std::string_view engine_state);

/// The Docker name of a state ("running", …; kUnknown is "unknown"), for logs and reports.
std::string_view ContainerStateName(ContainerState state);

/// A host file or directory mounted into a container (`HostConfig.Binds`, "SOURCE:TARGET[:ro]").
/// Both paths must be absolute and hold no ':' or ',' (the Binds syntax's separators) and no
/// control characters: CreateContainer refuses them with kInvalidArgument "invalid_bind".
struct BindMount {
  std::string source;  ///< the path on the host (must exist when the container is created)
  std::string target;  ///< the path inside the container
  bool read_only = true;
};

/// A resource limit of a container's processes (`HostConfig.Ulimits[]`, setrlimit(2) names without
/// `RLIMIT_` in lower case: "memlock", "nofile", …). -1 is unlimited (RLIM_INFINITY).
struct Ulimit {
  std::string name;
  int64_t soft = 0;
  int64_t hard = 0;

  bool operator==(const Ulimit&) const = default;
};

/// What to create: the body of `POST /containers/create` (Docker Engine API v1.41), reduced to
/// what an instance needs.
struct ContainerSpec {
  /// The container name (`?name=`); unique on the engine. Empty: the engine picks one.
  std::string name;
  /// The image reference, e.g. "localhost/gpuwerk-instance:bookworm". It must already be on the
  /// engine: CreateContainer never pulls.
  std::string image;
  /// The hostname inside the container (`Hostname`).
  std::string hostname;
  /// `Labels`, e.g. {"io.gpuwerk.instance": "<instance id>"}; ListContainers filters on them.
  std::map<std::string, std::string> labels;
  /// `Env` entries, each "NAME=value".
  std::vector<std::string> env;
  /// `Cmd`; empty: the image's CMD.
  std::vector<std::string> cmd;
  /// `HostConfig.Memory`, in bytes; 0: no limit.
  int64_t memory_bytes = 0;
  /// `HostConfig.NanoCpus`, billionths of a CPU; 0: no limit.
  int64_t nano_cpus = 0;
  /// `HostConfig.PidsLimit`, processes and threads; 0: the engine's default.
  int64_t pids_limit = 0;
  /// The capabilities the container keeps (`HostConfig.CapAdd`, names such as "CAP_CHOWN");
  /// every other one is dropped (`CapDrop ["ALL"]`). Default: kInstanceCapabilities.
  std::vector<std::string> capabilities{kInstanceCapabilities.begin(), kInstanceCapabilities.end()};
  /// `HostConfig.SecurityOpt ["no-new-privileges"]`: no process in the container gains
  /// privileges through execve (setuid binaries, file capabilities).
  bool no_new_privileges = true;
  /// Expose the host's GPUs: `HostConfig.Runtime` "nvidia" and `NVIDIA_VISIBLE_DEVICES=all`.
  bool gpu = false;
  /// The host address that container port 22/tcp is published on, with a host port the engine
  /// chooses (read it back from ContainerInfo::ssh_port). Must be a specific address that only
  /// the relay's side reaches (the host's internal address, or 127.0.0.1 on one machine): a
  /// wildcard ("", "0.0.0.0", "::") is refused with kInvalidArgument "public_ssh_bind".
  std::string ssh_bind_address = "127.0.0.1";
  /// `HostConfig.RestartPolicy.Name`: "no", "always", "unless-stopped" or "on-failure".
  std::string restart_policy = "unless-stopped";
  /// `HostConfig.NetworkMode`: the network the container is attached to (one made with
  /// CreateNetwork); empty: the engine's default bridge.
  std::string network;
  /// `HostConfig.Binds`: host paths mounted into the container (e.g. the agent's read-only
  /// authorized_keys directory, authorized_keys.h).
  std::vector<BindMount> binds;
  /// `HostConfig.ExtraHosts`: "NAME:ADDRESS" entries the engine adds to the container's
  /// /etc/hosts (e.g. "node1:198.18.0.12" for a 2-host instance, cluster_files.h).
  std::vector<std::string> extra_hosts;
  /// `HostConfig.ShmSize`: the size of the container's /dev/shm, bytes; 0: the engine's default
  /// (Docker's 64 MiB). Must not be negative.
  int64_t shm_size_bytes = 0;
  /// `HostConfig.Ulimits`, e.g. {"memlock", -1, -1} for RDMA; empty: the engine's defaults.
  std::vector<Ulimit> ulimits;
  /// `HostConfig.Privileged`: every capability, every device, no seccomp or AppArmor confinement:
  /// root in the container is root on the host (docs/docker-inside.md). When set, `capabilities`
  /// and `no_new_privileges` are not sent (the engine would give every capability anyway).
  bool privileged = false;
  /// `HostConfig.Runtime`, e.g. "sysbox-runc"; it takes the place of `gpu`'s "nvidia" runtime
  /// (the environment entry stays). Empty: "nvidia" with `gpu`, else the engine's default.
  std::string runtime;
  /// Anonymous volumes (`Volumes`, container paths, e.g. "/var/lib/docker"): a directory on the
  /// engine's own filesystem, removed with the container (RemoveContainer removes them).
  std::vector<std::string> volumes;
};

/// What to create: the body of `POST /networks/create` (Docker Engine API v1.41), reduced to what
/// an instance network needs: a bridge of its own.
struct NetworkSpec {
  /// The network name; unique on the engine. Also the name of the host's bridge interface
  /// (`com.docker.network.bridge.name`), so at most 15 characters.
  std::string name;
  /// `Labels`; ListNetworks filters on them.
  std::map<std::string, std::string> labels;
};

/// What the engine says about one network.
struct NetworkInfo {
  std::string id;
  std::string name;
  std::map<std::string, std::string> labels;
};

/// What the engine says about one container (Docker Engine API v1.41).
struct ContainerInfo {
  /// The engine's full container id (hex).
  std::string id;
  /// The container name, without Docker's leading "/".
  std::string name;
  /// The image reference the container was created from (`Config.Image`; list: `Image`).
  std::string image;
  std::map<std::string, std::string> labels;
  ContainerState state = ContainerState::kUnknown;
  /// The main process's exit code (`State.ExitCode`); 0 while running. Inspect only (0 in lists).
  int exit_code = 0;
  /// `State.StartedAt` / `State.FinishedAt`, RFC 3339 exactly as the engine sent it (Docker sends
  /// "0001-01-01T00:00:00Z" for "never"). Inspect only (empty in lists).
  std::string started_at;
  std::string finished_at;
  /// The host port that container port 22/tcp is published on; 0 when not published (or not
  /// while the container is stopped: Docker drops the binding then).
  uint16_t ssh_port = 0;
  /// Whether the kernel's OOM killer ended the main process (`State.OOMKilled`). Inspect only.
  bool oom_killed = false;
  /// The engine's error for this container (`State.Error`), e.g. a failed start. Inspect only.
  std::string error;
  /// `HostConfig.Memory`, `HostConfig.NanoCpus`, `HostConfig.PidsLimit` as the engine has them
  /// now (`docker update` changes them); 0 when unset or null. Inspect only.
  int64_t memory_bytes = 0;
  int64_t nano_cpus = 0;
  int64_t pids_limit = 0;
};

/// Facts about the engine (`GET /version`).
struct EngineVersion {
  std::string version;      ///< the engine's own version, e.g. "24.0.7" or "4.3.1" (podman)
  std::string api_version;  ///< the newest Docker API version it serves, e.g. "1.41"
  std::string os;           ///< "linux"
  std::string arch;         ///< "amd64", "arm64"
  std::string kernel_version;
  std::string platform;  ///< `Platform.Name`, e.g. "Docker Engine - Community"
};

/// The container engine on one host, seen through the Docker Engine API v1.41 (Docker; podman's
/// compatible service). The host agent's only way to touch containers; the seam where tests put a
/// fake. Ids are the engine's container ids or names (the API accepts either).
///
/// Every call is bounded: `timeout` is the most it may take (zero or negative: the
/// implementation's configured default). A call that runs out of time returns kDeadlineExceeded
/// "engine_timeout" and never blocks longer (case C11): callers must then treat what they knew
/// as stale. Common errors of every call:
///   - kUnavailable "engine_unavailable": the engine cannot be reached (socket missing, refused,
///     connection dropped); the message names the socket.
///   - kDeadlineExceeded "engine_timeout": no complete answer within the time limit.
///   - kUnavailable "engine_error": the engine answered 5xx; the message carries its reason.
///   - kInvalidArgument "engine_bad_request": the engine answered 400 (a bad spec or argument).
///
/// Implementations are thread-safe: any number of calls may run at once.
class ContainerEngine {
 public:
  using Timeout = std::chrono::milliseconds;

  virtual ~ContainerEngine() = default;

  /// `GET /_ping`: the engine answers. Only the common errors.
  virtual core::Result<void> Ping(Timeout timeout) = 0;

  /// `GET /version`: the engine's version and the API versions it serves. Only the common errors
  /// (and "engine_bad_response" when the answer is not the expected JSON).
  virtual core::Result<EngineVersion> Version(Timeout timeout) = 0;

  /// `POST /containers/create?name=…`: creates (does not start) a container from `spec` and
  /// returns its id. Never pulls the image. Errors: kFailedPrecondition "image_not_found" (the
  /// image is not on the engine; the message names it; nothing is created), kAlreadyExists
  /// "container_exists" (the name is taken), kInvalidArgument "public_ssh_bind" (see
  /// ContainerSpec::ssh_bind_address), kInvalidArgument "invalid_container_spec" (no image).
  virtual core::Result<std::string> CreateContainer(const ContainerSpec& spec, Timeout timeout) = 0;

  /// `PUT /containers/{id}/archive?path=…`: unpacks the tar archive `tar_bytes` (uncompressed
  /// POSIX tar, owners and modes as recorded in it) into directory `path` of the container's
  /// filesystem. Works on created and stopped containers too. Errors: kNotFound
  /// "container_not_found" (no such container, or `path` does not exist in it).
  virtual core::Result<void> PutArchive(std::string_view id, std::string_view path,
                                        std::string_view tar_bytes, Timeout timeout) = 0;

  /// `GET /containers/{id}/archive?path=…`: the file or directory `path` of the container's
  /// filesystem as an uncompressed tar archive (the engine reads it from the container's root,
  /// nothing runs inside the container). Works on created and stopped containers too. The answer
  /// is bounded like every answer (32 MiB for DockerEngine). Errors: kNotFound
  /// "container_not_found" (no such container, or `path` does not exist in it).
  virtual core::Result<std::string> GetArchive(std::string_view id, std::string_view path,
                                               Timeout timeout) = 0;

  /// `POST /containers/{id}/start`. Starting a running container succeeds (304). Errors:
  /// kNotFound "container_not_found"; kFailedPrecondition "container_conflict" (e.g. being
  /// removed); "engine_error" when the runtime fails (e.g. "unknown runtime specified nvidia").
  virtual core::Result<void> StartContainer(std::string_view id, Timeout timeout) = 0;

  /// `POST /containers/{id}/restart?t=…`: stops the container (SIGTERM, then SIGKILL after
  /// `stop_timeout_seconds` seconds) and starts it again; its filesystem is kept. Success means
  /// only that the engine accepted the restart: the container may exit right after (case C10),
  /// so callers confirm with InspectContainer. The call may take up to `timeout` plus
  /// `stop_timeout_seconds`. Errors: kNotFound "container_not_found".
  virtual core::Result<void> RestartContainer(std::string_view id, int stop_timeout_seconds,
                                              Timeout timeout) = 0;

  /// `GET /containers/{id}/json`: the container's current state. Errors: kNotFound
  /// "container_not_found" when it does not exist (or no longer).
  virtual core::Result<ContainerInfo> InspectContainer(std::string_view id, Timeout timeout) = 0;

  /// `DELETE /containers/{id}?force=…&v=true`: removes the container and its anonymous volumes;
  /// `force` kills it first when it runs. Idempotent: a container that does not exist is
  /// success. Errors: kFailedPrecondition "container_conflict" (running and not `force`, or
  /// already being removed).
  virtual core::Result<void> RemoveContainer(std::string_view id, bool force, Timeout timeout) = 0;

  /// `GET /containers/json?all=true&filters={"label":[…]}`: every container in any state that
  /// carries all of `label_filter`'s labels (an empty value matches the label with any value; an
  /// empty filter lists every container). Entries carry id, name, image, labels, state and
  /// ssh_port; exit_code, started_at, finished_at, oom_killed and error are filled only by
  /// InspectContainer. Order unspecified.
  virtual core::Result<std::vector<ContainerInfo>> ListContainers(
      const std::map<std::string, std::string>& label_filter, Timeout timeout) = 0;

  /// `POST /networks/create`: creates a bridge network from `spec` (the engine picks its subnet).
  /// Errors: kAlreadyExists "network_exists" (the name is taken; nothing changed),
  /// kInvalidArgument "invalid_network_spec" (no name, or a name longer than 15 characters).
  virtual core::Result<void> CreateNetwork(const NetworkSpec& spec, Timeout timeout) = 0;

  /// `DELETE /networks/{name}`. Idempotent: a network that does not exist is success. Errors:
  /// kFailedPrecondition "network_in_use" (a container is still attached).
  virtual core::Result<void> RemoveNetwork(std::string_view name, Timeout timeout) = 0;

  /// `GET /networks?filters={"label":[…]}`: every network that carries all of `label_filter`'s
  /// labels (an empty value matches the label with any value). Order unspecified.
  virtual core::Result<std::vector<NetworkInfo>> ListNetworks(
      const std::map<std::string, std::string>& label_filter, Timeout timeout) = 0;

  /// `GET /images/{name}/json`: whether the image is on the engine (true) or not (false).
  virtual core::Result<bool> ImageExists(std::string_view name, Timeout timeout) = 0;

  /// `POST /networks/{network}/connect`: attaches container `id` (created, not started yet) to
  /// an existing network as well, with the fixed address `address` (an IPv4 or IPv6 literal inside
  /// the network's subnet; `EndpointConfig.IPAMConfig`): how a 2-host instance's node joins the
  /// rail (docs/clusters.md). Errors: kNotFound "network_not_found" (no such network or
  /// container), kInvalidArgument "invalid_address" (not an IP literal); the common ones. An
  /// engine seam without it (a test double) answers kFailedPrecondition "engine_unsupported".
  virtual core::Result<void> ConnectNetwork(std::string_view id, std::string_view network,
                                            std::string_view address, Timeout timeout) {
    (void)id, (void)network, (void)address, (void)timeout;
    return core::Fail(core::ErrorCode::kFailedPrecondition, "engine_unsupported",
                      "this container engine cannot attach a container to a second network");
  }
};

}  // namespace gpuwerk::agent
