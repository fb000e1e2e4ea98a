#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
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

  /// The sync path, appended to the server URL (without its trailing '/').
  static constexpr const char* kSyncPath = "/api/v1/agent/sync";

 private:
  std::string url_;
  std::string token_;
  std::chrono::milliseconds timeout_;
};

}  // namespace gpuwerk::agent
