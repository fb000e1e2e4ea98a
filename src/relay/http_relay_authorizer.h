#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "relay/relay_authorizer.h"

namespace gpuwerk::relay {

/// The request body of `POST /api/v1/relay/authorize` for `request` (docs/ssh.md).
nlohmann::json AuthorizeRequestJson(const AuthorizeRequest& request);
/// The answer body for `decision`: {"decision":"allow","target":{…}} or
/// {"decision":"refuse","code":"not_authorized","message":…} (docs/ssh.md).
nlohmann::json AuthorizeDecisionJson(const AuthorizeDecision& decision);
/// Reads an answer body back. Errors: kUnavailable "bad_authorize_response" when it is not one
/// of the two shapes (a refusal never becomes a permission).
core::Result<AuthorizeDecision> ParseAuthorizeDecision(const nlohmann::json& body);

/// A RelayAuthorizer that asks the control plane: `POST {server_url}/api/v1/relay/authorize` with
/// `Authorization: Bearer <token>` (an operator's API token) over HTTP(S), libcurl, at most
/// `timeout` per call. Errors (the relay then refuses with "try again", never lets in):
/// kUnavailable "server_unavailable" (no answer), kUnauthenticated "relay_token_refused" (401 or
/// 403), kUnavailable "server_error" (another status), "bad_authorize_response". Thread-safe.
class HttpRelayAuthorizer final : public RelayAuthorizer {
 public:
  HttpRelayAuthorizer(std::string server_url, std::string token,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  core::Result<AuthorizeDecision> Authorize(const AuthorizeRequest& request) override;

  static constexpr const char* kPath = "/api/v1/relay/authorize";

 private:
  std::string url_;
  std::string token_;
  std::chrono::milliseconds timeout_;
};

}  // namespace gpuwerk::relay
