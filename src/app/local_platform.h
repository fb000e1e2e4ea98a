#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "app/server_app.h"
#include "core/error.h"

namespace gpuwerk::app {

/// What `gpuwerk up` adds to the server on one machine (DESIGN.md "Command line"): the local
/// container engine, found or started, and one local agent for this machine registered as a
/// `spark-1x` host.
struct LocalPlatformOptions {
  /// `unix:///PATH` of a Docker Engine API socket to use; empty: find one (a Docker daemon's
  /// /var/run/docker.sock or /run/docker.sock when it answers), else start a podman API service
  /// of our own on DATA/engine/podman.sock (see LocalPlatform::Start).
  std::string engine;
  std::filesystem::path data_dir;
  /// The host name the machine is registered under (a DNS label).
  std::string host_name = "local";
  std::string gpu_type = "spark-1x";
  /// The image instances run; checked at start so a missing one is said at once.
  std::string instance_image;
  /// Where the SSH relay listens, "ADDR:PORT" (numeric address); empty: no relay.
  std::string ssh_listen = "127.0.0.1:2222";
  /// The relay process's memory limit, MiB, and its log level (RelayProcess).
  int64_t relay_memory_limit_mib = 2048;
  /// The balancers whose PROXY protocol header the relay believes (RelayProcessOptions).
  std::vector<std::string> relay_trusted_proxies;
  std::string log_level = "info";
  /// Docker inside the agent's instances (off | sysbox | privileged) and their /dev/shm size,
  /// bytes (agent::ResolveInstanceRuntime; docs/docker-inside.md).
  std::string docker_inside = "off";
  int64_t instance_shm_bytes = 0;
};

/// The local engine, SSH relay and agent of `gpuwerk up`. Start order: engine, relay, host
/// registration, agent; Stop order: agent, relay, then the podman service if we started it.
/// Containers are not touched by Stop: they keep running, and the next `gpuwerk up` adopts them
/// (the agent's adoption rules, docs/agent-protocol.md).
class LocalPlatform {
 public:
  /// Finds or starts the engine, registers this machine (or gives its registration a fresh agent
  /// token: no token is kept on disk), and starts the agent in a thread of this process, talking
  /// to `server` over its HTTP API like any remote agent. The machine registers as a host with a
  /// GPU when NVML reports one, otherwise as a host without a GPU (its instances say "no GPU
  /// attached").
  ///
  /// A podman service we start: `podman system service --time=0 unix://DATA/engine/podman.sock`
  /// in its own session (Ctrl-C reaches only us), with CONTAINERS_CONF = DATA/engine/
  /// containers.conf (the project's config/containers.conf, compiled in), log in
  /// DATA/engine/podman.log, pid in DATA/engine/podman.pid. One left running by a `gpuwerk up`
  /// that was killed is adopted when it answers.
  ///
  /// The relay (docs/ssh.md "Running it") runs in a process of its own (RelayProcess: `gpuwerk
  /// relay`, started again when it dies, under a memory limit), authenticated by the relay
  /// credential `local` (access::RelayCredentials::IssueLocal, a new secret on every start) and
  /// talking to `server` over loopback HTTP like a remote relay; its host key and relay key live
  /// in DATA/relay/ with the relay CA (created once, 0600). The agent gets the CA's public line
  /// and a probe certificate of it (RelayProcess) for every container's authorized_keys.
  ///
  /// Errors: kUnavailable "engine_unavailable" (no engine found and podman missing or not
  /// answering within 30 s; the message says what to install or pass), kFailedPrecondition
  /// "image_not_found" (the instance image is not on the engine; the message gives the command
  /// that builds it), RelayProcess::Start's, and the host registration's errors.
  static core::Result<std::unique_ptr<LocalPlatform>> Start(const LocalPlatformOptions& options,
                                                            ServerApp& server);
  ~LocalPlatform();

  /// The engine in use, as `unix:///PATH`, and who runs it ("podman service started by gpuwerk",
  /// "podman service left by an earlier run", "given with --engine", "Docker").
  const std::string& engine_url() const;
  const std::string& engine_origin() const;
  /// The registered host's name and whether it has a GPU.
  const std::string& host_name() const;
  bool has_gpu() const;
  /// The agent's Docker inside mode: "off", "sysbox" or "privileged".
  const std::string& docker_inside() const;
  /// The relay's address as "ADDR" and port (0 when no relay runs).
  const std::string& ssh_address() const;
  uint16_t ssh_port() const;

  /// Stops the agent and then the podman service we started (SIGTERM, SIGKILL after 10 s).
  /// Idempotent.
  void Stop();

  struct Impl;  // internal

 private:
  explicit LocalPlatform(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuwerk::app
