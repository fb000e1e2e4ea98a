#pragma once

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"

namespace gpuwerk::agent {

/// The agent's side of `POST /api/v1/agent/sync` (docs/agent-protocol.md): sends one request
/// body, returns the response body. The seam where Agent tests put a fake control plane.
class SyncClient {
 public:
  virtual ~SyncClient() = default;
  /// Sends `request` and returns the parsed response object. Errors: see AgentClient.
  virtual core::Result<nlohmann::json> Sync(const nlohmann::json& request) = 0;
  /// The long poll `GET /api/v1/agent/watch`: returns the host's desired-state version once it
  /// differs from `version` (the `desired_version` of the last sync answer), or after about
  /// `wait` with it unchanged. This default says the server has no watch (kUnimplemented
  /// "watch_unsupported"); the agent then relies on its periodic sync alone.
  virtual core::Result<std::string> Watch(const std::string& version, std::chrono::seconds wait) {
    (void)version;
    (void)wait;
    return core::Fail(core::ErrorCode::kFailedPrecondition, "watch_unsupported",
                      "this control plane has no watch");
  }
  /// Makes a Watch in progress (and every later one) return at once with an error: the agent is
  /// stopping. Thread-safe. The default does nothing.
  virtual void CancelWatch() {}
};

/// A SyncClient over HTTP(S) with libcurl: `POST {server_url}/api/v1/agent/sync` with
/// `Authorization: Bearer <host_token>` and a JSON body, at most `timeout` per call. Errors:
///   - kUnavailable "server_unavailable": the server cannot be reached (refused, DNS, TLS, reset,
///     no answer within `timeout`); the message names the URL.
///   - kUnauthenticated "host_token_refused": 401; the host token was refused (wrong or revoked).
///   - kUnavailable "server_error": any other non-2xx answer; the message has the status and the
///     problem's `code`/`detail` when present.
///   - kUnavailable "bad_sync_response": a 2xx answer that is not a JSON object.
/// Messages never contain the token. Thread-safe: each call uses its own curl handle.
class AgentClient final : public SyncClient {
 public:
  AgentClient(std::string server_url, std::string host_token,
              std::chrono::milliseconds timeout = std::chrono::seconds(10));
  core::Result<nlohmann::json> Sync(const nlohmann::json& request) override;
  /// Waits at most `wait` + the call timeout. Errors: as Sync.
  core::Result<std::string> Watch(const std::string& version, std::chrono::seconds wait) override;
  void CancelWatch() override { cancelled_ = true; }

  /// The paths, appended to the server URL (without its trailing '/').
  static constexpr const char* kSyncPath = "/api/v1/agent/sync";
  static constexpr const char* kWatchPath = "/api/v1/agent/watch";

 private:
  /// POST `post_body` (JSON) to, or with none GET, `path`; the answer's JSON object.
  core::Result<nlohmann::json> Call(std::string_view path,
                                    const std::optional<std::string>& post_body,
                                    std::chrono::milliseconds timeout);

  std::string url_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace gpuwerk::agent
