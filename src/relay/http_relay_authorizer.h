#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "protocol/api_client.h"
#include "protocol/relay_messages.h"
#include "relay/relay_authorizer.h"

namespace gpuwerk::relay {

/// The wire form of `request` (protocol::RelayAuthorizeRequest, docs/ssh.md) and back.
protocol::RelayAuthorizeRequest ToWire(const AuthorizeRequest& request);
AuthorizeRequest FromWire(const protocol::RelayAuthorizeRequest& request);
/// The wire form of `decision`: allow with its target, or refuse with "not_authorized" and the
/// refusal as the message; and back.
protocol::RelayAuthorizeDecision ToWire(const AuthorizeDecision& decision);
AuthorizeDecision FromWire(const protocol::RelayAuthorizeDecision& decision);

/// A RelayAuthorizer that asks the control plane: `POST {server_url}/api/v1/relay/authorize` with
/// `Authorization: Bearer <token>` (the relay's credential, "gwr_…": docs/ssh.md "The relay's
/// credential") over the one API client (protocol::ApiClient), at most `timeout` per call. Errors
/// (the relay then refuses with "try again", never lets in): kUnavailable "server_unavailable"
/// (no answer), kUnauthenticated "relay_token_refused" (401 or 403: the credential is unknown,
/// revoked, or not a relay credential), kUnavailable "server_error" (another status),
/// kUnavailable "bad_authorize_response" (an answer not in the format,
/// protocol::RelayAuthorizeDecisionFromJson: a refusal never becomes a permission). Thread-safe.
/// Its requests share one kept-alive connection where the server keeps it open.
class HttpRelayAuthorizer final : public RelayAuthorizer {
 public:
  HttpRelayAuthorizer(std::string server_url, std::string token,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5));
  core::Result<AuthorizeDecision> Authorize(const AuthorizeRequest& request) override;
  /// One `POST {server_url}/api/v1/relay/recheck` per protocol::kMaxRecheckBatch items, each
  /// within `timeout`, on one kept-alive connection (protocol::ApiClient::ShareConnections).
  /// Errors: Authorize's, with "bad_recheck_response" for an answer not in the format or not
  /// one result per item in order.
  core::Result<std::vector<RecheckVerdict>> Recheck(const std::vector<RecheckItem>& items) override;

  static constexpr const char* kPath = "/api/v1/relay/authorize";
  static constexpr const char* kRecheckPath = "/api/v1/relay/recheck";

 private:
  /// `answer`'s status as Authorize judges it: "" when 200, else the error.
  core::Result<void> CheckStatus(const core::Result<protocol::ApiResponse>& answer,
                                 const std::string& url) const;

  protocol::ApiClient api_;
};

}  // namespace gpuwerk::relay
