#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "core/error.h"
#include "protocol/agent_sync.h"
#include "protocol/api_client.h"

namespace gpuwerk::agent {

/// The agent's side of `POST /api/v1/agent/sync` (docs/agent-protocol.md): sends one request,
/// returns the answer. The seam where Agent tests put a fake control plane.
class SyncClient {
 public:
  virtual ~SyncClient() = default;
  /// Sends `request` and returns the answer. Errors: see AgentClient.
  virtual core::Result<protocol::AgentSyncAnswer> Sync(
      const protocol::AgentSyncRequest& request) = 0;
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

/// A SyncClient over HTTP(S): the one API client (protocol::ApiClient) with
/// `Authorization: Bearer <host_token>`, at most `timeout` per call. Errors:
///   - kUnavailable "server_unavailable": the server cannot be reached (refused, DNS, TLS, reset,
///     no answer within `timeout`); the message names the URL.
///   - kUnauthenticated "host_token_refused": 401; the host token was refused (wrong or revoked).
///   - kUnavailable "server_error": any other non-2xx answer; the message has the status and the
///     problem's `code` and `detail`.
///   - kUnavailable "bad_sync_response": a 2xx answer that is not the format's
///     (protocol::AgentSyncAnswerFromJson, AgentWatchAnswerFromJson); the message names the field.
/// Messages never contain the token. Thread-safe: Sync, Watch and CancelWatch may run at once.
class AgentClient final : public SyncClient {
 public:
  AgentClient(std::string server_url, std::string host_token,
              std::chrono::milliseconds timeout = std::chrono::seconds(10));
  core::Result<protocol::AgentSyncAnswer> Sync(const protocol::AgentSyncRequest& request) override;
  /// Waits at most `wait` + the call timeout. Errors: as Sync.
  core::Result<std::string> Watch(const std::string& version, std::chrono::seconds wait) override;
  void CancelWatch() override { cancelled_ = true; }
  /// What "host_token_refused" tells the person to do; by default "register the host again
  /// (gpuwerk admin hosts add) and pass the new token". `gpuwerk up`, which registers its host
  /// itself, says to restart it instead. Call before the first Sync.
  void SetTokenRefusedAdvice(std::string advice) { token_refused_advice_ = std::move(advice); }

  /// The paths, appended to the server URL (without its trailing '/').
  static constexpr const char* kSyncPath = "/api/v1/agent/sync";
  static constexpr const char* kWatchPath = "/api/v1/agent/watch";

 private:
  /// POSTs `body` to, or with none GETs, `path`; the answer's JSON object.
  core::Result<nlohmann::json> Call(const std::string& path, const nlohmann::json* body,
                                    std::chrono::milliseconds timeout);

  std::atomic<bool> cancelled_{false};  ///< before api_: the client points at it
  protocol::ApiClient api_;
  std::chrono::milliseconds timeout_;
  std::string token_refused_advice_ =
      "register the host again (gpuwerk admin hosts add) and pass the new token";
};

}  // namespace gpuwerk::agent
