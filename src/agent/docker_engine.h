#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/container_engine.h"
#include "core/error.h"

namespace gpuwerk::agent {

/// Configuration of DockerEngine.
struct DockerEngineOptions {
  /// The engine's unix socket, e.g. "/var/run/docker.sock" or a podman API service's
  /// "/run/gpuwerk/podman.sock" (a path, not a URL).
  std::string socket_path;
  /// The time limit of a call that passes a zero or negative timeout.
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
};

/// A ContainerEngine that speaks the Docker Engine API v1.41 (paths `/v1.41/…`) over a unix
/// socket with libcurl. Works against Docker (API ≥ 1.41) and podman's Docker-compatible service
/// (`podman system service`, 4.x), whose differences it absorbs: podman answers some conflicts
/// with 500 and a `cause` ("that name is already in use", "container state improper") where
/// Docker answers 409; both map to the same Error.
///
/// Status mapping, beyond what ContainerEngine documents: 404 → kNotFound "container_not_found"
/// (on create: kFailedPrecondition "image_not_found"); 409 →
/// kAlreadyExists "container_exists" on create, else kFailedPrecondition "container_conflict"; 400
/// → kInvalidArgument "engine_bad_request"; other 4xx and 5xx → kUnavailable "engine_error"; an
/// answer that is not the JSON the API promises → kUnavailable "engine_bad_response". Messages
/// carry the engine's `message` and name the socket; they never carry request bodies (which hold
/// keys).
///
/// Thread-safe: each call uses its own connection (a curl easy handle of its own). Construction
/// does not connect.
class DockerEngine final : public ContainerEngine {
 public:
  using Options = DockerEngineOptions;

  explicit DockerEngine(Options options);
  ~DockerEngine() override;

  core::Result<void> Ping(Timeout timeout) override;
  core::Result<EngineVersion> Version(Timeout timeout) override;
  core::Result<std::string> CreateContainer(const ContainerSpec& spec, Timeout timeout) override;
  core::Result<void> PutArchive(std::string_view id, std::string_view path,
                                std::string_view tar_bytes, Timeout timeout) override;
  core::Result<std::string> GetArchive(std::string_view id, std::string_view path,
                                       Timeout timeout) override;
  core::Result<void> StartContainer(std::string_view id, Timeout timeout) override;
  core::Result<void> RestartContainer(std::string_view id, int stop_timeout_seconds,
                                      Timeout timeout) override;
  core::Result<ContainerInfo> InspectContainer(std::string_view id, Timeout timeout) override;
  core::Result<void> RemoveContainer(std::string_view id, bool force, Timeout timeout) override;
  core::Result<std::vector<ContainerInfo>> ListContainers(
      const std::map<std::string, std::string>& label_filter, Timeout timeout) override;
  core::Result<bool> ImageExists(std::string_view name, Timeout timeout) override;
  core::Result<void> CreateNetwork(const NetworkSpec& spec, Timeout timeout) override;
  core::Result<void> ConnectNetwork(std::string_view id, std::string_view network,
                                    std::string_view address, Timeout timeout) override;
  core::Result<void> RemoveNetwork(std::string_view name, Timeout timeout) override;
  core::Result<std::vector<NetworkInfo>> ListNetworks(
      const std::map<std::string, std::string>& label_filter, Timeout timeout) override;

  /// The "/v1.41" path prefix of every request.
  static constexpr std::string_view kApiPrefix = "/v1.41";

 private:
  /// One HTTP exchange's outcome.
  struct Response {
    long status = 0;
    std::string body;
  };

  /// Sends `method` `kApiPrefix + path_and_query` with `body` (sent when non-empty or when the
  /// method is POST/PUT) of `content_type`, waits at most `timeout` (zero: the default), and
  /// returns the status and body. Errors: only "engine_unavailable" and "engine_timeout".
  core::Result<Response> Call(std::string_view method, const std::string& path_and_query,
                              std::string_view body, std::string_view content_type,
                              Timeout timeout) const;

  /// "unix://<socket_path>", for messages.
  std::string Where() const;

  Options options_;
};

}  // namespace gpuwerk::agent
