#include "agent/agent_client.h"

#include <utility>

namespace gpuwerk::agent {
namespace {

core::Error BadAnswer(const std::string& url, const core::Error& why) {
  return core::Error(
      core::ErrorCode::kUnavailable, "bad_sync_response",
      "the server at " + url + " answered with something the agent cannot use: " + why.message);
}

}  // namespace

AgentClient::AgentClient(std::string server_url, std::string host_token,
                         std::chrono::milliseconds timeout)
    : api_(protocol::ApiClient::ForService(std::move(server_url), std::move(host_token),
                                           "gpuwerk-agent", timeout)),
      timeout_(timeout) {
  api_.SetCancelFlag(&cancelled_);
}

core::Result<protocol::AgentSyncAnswer> AgentClient::Sync(
    const protocol::AgentSyncRequest& request) {
  const nlohmann::json body = protocol::ToJson(request);
  GPUWERK_ASSIGN_OR_RETURN(nlohmann::json answer, Call(kSyncPath, &body, timeout_));
  auto parsed = protocol::AgentSyncAnswerFromJson(answer);
  if (!parsed) return core::Fail(BadAnswer(api_.base_url() + kSyncPath, parsed.error()));
  return parsed;
}

core::Result<std::string> AgentClient::Watch(const std::string& version,
                                             std::chrono::seconds wait) {
  const std::string path = std::string(kWatchPath) + "?version=" + protocol::PathEscape(version) +
                           "&wait_seconds=" + std::to_string(wait.count());
  GPUWERK_ASSIGN_OR_RETURN(nlohmann::json answer,
                           Call(path, nullptr, std::chrono::milliseconds(wait) + timeout_));
  auto parsed = protocol::AgentWatchAnswerFromJson(answer);
  if (!parsed) return core::Fail(BadAnswer(api_.base_url() + kWatchPath, parsed.error()));
  return std::move(parsed->version);
}

core::Result<nlohmann::json> AgentClient::Call(const std::string& path, const nlohmann::json* body,
                                               std::chrono::milliseconds timeout) {
  const std::string url = api_.base_url() + path;
  auto response = api_.Call(body != nullptr ? "POST" : "GET", path, body, {}, timeout);
  if (!response) {  // its message names the server and the reason
    return core::Fail(core::ErrorCode::kUnavailable, "server_unavailable",
                      response.error().message);
  }
  if (response->status == 401) {
    return core::Fail(core::ErrorCode::kUnauthenticated, "host_token_refused",
                      "the server at " + api_.base_url() +
                          " refused the host token (401): it is wrong or was revoked (the host "
                          "removed with 'gpuwerk admin hosts rm'?); " +
                          token_refused_advice_);
  }
  if (!response->ok()) {
    const core::Error problem = protocol::ErrorFromResponse(*response);
    return core::Fail(core::ErrorCode::kUnavailable, "server_error",
                      "the server at " + url + " answered " + std::to_string(response->status) +
                          " " + problem.api_code + ": " + problem.message);
  }
  if (!response->body.is_object()) {
    return core::Fail(core::ErrorCode::kUnavailable, "bad_sync_response",
                      "the server at " + url + " answered with something not a JSON object");
  }
  return std::move(response->body);
}

}  // namespace gpuwerk::agent
