#include "relay/http_relay_authorizer.h"

#include <algorithm>

namespace gpuwerk::relay {

protocol::RelayAuthorizeRequest ToWire(const AuthorizeRequest& r) {
  return {.user = r.user,
          .key_type = r.key_type,
          .public_key = r.key_blob_base64,
          .fingerprint = r.key_fingerprint,
          .source_address = r.source_address};
}

AuthorizeRequest FromWire(const protocol::RelayAuthorizeRequest& r) {
  return {.user = r.user,
          .key_type = r.key_type,
          .key_blob_base64 = r.public_key,
          .key_fingerprint = r.fingerprint,
          .source_address = r.source_address};
}

protocol::RelayAuthorizeDecision ToWire(const AuthorizeDecision& d) {
  if (!d.target) return protocol::RelayAuthorizeDecision::Refuse(d.refusal);
  return protocol::RelayAuthorizeDecision::Allow(*d.target);
}

AuthorizeDecision FromWire(const protocol::RelayAuthorizeDecision& d) {
  if (!d.target) return AuthorizeDecision::Refuse(d.message);
  return AuthorizeDecision::Allow(*d.target);
}

HttpRelayAuthorizer::HttpRelayAuthorizer(std::string server_url, std::string token,
                                         std::chrono::milliseconds timeout)
    : api_(protocol::ApiClient::ForService(std::move(server_url), std::move(token), "gpuwerk-relay",
                                           timeout)) {
  api_.ShareConnections();
}

core::Result<void> HttpRelayAuthorizer::CheckStatus(
    const core::Result<protocol::ApiResponse>& answer, const std::string& url) const {
  if (!answer) {
    return core::Fail(core::ErrorCode::kUnavailable, "server_unavailable", answer.error().message);
  }
  const int status = answer->status;
  if (status == 401 || status == 403) {
    return core::Fail(core::ErrorCode::kUnauthenticated, "relay_token_refused",
                      "the server at " + url + " refused the relay's credential (" +
                          std::to_string(status) +
                          "); it must be a relay credential (gwr_...) that is not revoked");
  }
  if (status != 200) {
    return core::Fail(core::ErrorCode::kUnavailable, "server_error",
                      "the server at " + url + " answered " + std::to_string(status));
  }
  return {};
}

core::Result<AuthorizeDecision> HttpRelayAuthorizer::Authorize(const AuthorizeRequest& request) {
  const std::string url = api_.base_url() + kPath;
  const nlohmann::json body = protocol::ToJson(ToWire(request));
  auto answer = api_.Call("POST", kPath, &body);
  GPUWERK_TRY(CheckStatus(answer, url));
  auto decision = protocol::RelayAuthorizeDecisionFromJson(answer->body);
  if (!decision) {
    return core::Fail(
        core::ErrorCode::kUnavailable, "bad_authorize_response",
        "the server's authorize answer is not understood: " + decision.error().message);
  }
  return FromWire(*decision);
}

core::Result<std::vector<RecheckVerdict>> HttpRelayAuthorizer::Recheck(
    const std::vector<RecheckItem>& items) {
  const std::string url = api_.base_url() + kRecheckPath;
  std::vector<RecheckVerdict> verdicts;
  verdicts.reserve(items.size());
  for (size_t start = 0; start < items.size(); start += protocol::kMaxRecheckBatch) {
    const size_t end = std::min(items.size(), start + protocol::kMaxRecheckBatch);
    protocol::RelayRecheckRequest batch;
    for (size_t i = start; i < end; ++i) {
      batch.relay_sessions.push_back({.id = items[i].relay_session_id,
                                      .instance_id = items[i].instance_id,
                                      .login = items[i].login,
                                      .request = ToWire(items[i].request)});
    }
    const nlohmann::json body = protocol::ToJson(batch);
    auto answer = api_.Call("POST", kRecheckPath, &body);
    GPUWERK_TRY(CheckStatus(answer, url));
    auto results = protocol::RelayRecheckResultsFromJson(answer->body);
    if (!results || results->size() != end - start) {
      return core::Fail(core::ErrorCode::kUnavailable, "bad_recheck_response",
                        "the server's recheck answer is not understood: " +
                            (results ? std::string("not one result per relay session")
                                     : results.error().message));
    }
    for (size_t i = start; i < end; ++i) {
      const auto& r = (*results)[i - start];
      if (r.id != items[i].relay_session_id) {
        return core::Fail(core::ErrorCode::kUnavailable, "bad_recheck_response",
                          "the server's recheck answer is not in the order asked");
      }
      verdicts.push_back({.allowed = r.allowed, .message = r.message});
    }
  }
  return verdicts;
}

}  // namespace gpuwerk::relay
