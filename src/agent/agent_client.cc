#include "agent/agent_client.h"

#include <optional>
#include <utility>

#include "core/curl_handles.h"

namespace gpuwerk::agent {
namespace {

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

int AbortWhenCancelled(void* cancelled, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<std::atomic<bool>*>(cancelled)->load() ? 1 : 0;
}

}  // namespace

AgentClient::AgentClient(std::string server_url, std::string host_token,
                         std::chrono::milliseconds timeout)
    : url_(std::move(server_url)), token_(std::move(host_token)), timeout_(timeout) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  core::CurlGlobalInitOnce();
}

core::Result<nlohmann::json> AgentClient::Sync(const nlohmann::json& request) {
  return Call(kSyncPath, request.dump(), timeout_);
}

core::Result<std::string> AgentClient::Watch(const std::string& version,
                                             std::chrono::seconds wait) {
  const std::string path = std::string(kWatchPath) + "?version=" + version +
                           "&wait_seconds=" + std::to_string(wait.count());
  GPUWERK_ASSIGN_OR_RETURN(auto answer,
                           Call(path, std::nullopt, std::chrono::milliseconds(wait) + timeout_));
  auto v = answer.find("version");
  if (v == answer.end() || !v->is_string()) {
    return core::Fail(core::ErrorCode::kUnavailable, "bad_sync_response",
                      "the server at " + url_ + " answered the watch without a version");
  }
  return v->get<std::string>();
}

core::Result<nlohmann::json> AgentClient::Call(std::string_view path,
                                               const std::optional<std::string>& post_body,
                                               std::chrono::milliseconds timeout) {
  core::CurlEasy curl(curl_easy_init());
  if (!curl) return core::Internal("curl_easy_init failed");
  const std::string url = url_ + std::string(path);
  const std::string body = post_body.value_or("");
  std::string response;
  char error_buf[CURL_ERROR_SIZE] = {};
  const std::string auth = "Authorization: Bearer " + token_;
  core::CurlList headers(curl_slist_append(nullptr, "Content-Type: application/json"));
  curl_slist_append(headers.get(), "Accept: application/json");
  curl_slist_append(headers.get(), auth.c_str());
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  if (post_body) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buf);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // CancelWatch: the transfer-info callback aborts a long poll when the agent stops.
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, AbortWhenCancelled);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &cancelled_);
  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    return core::Fail(core::ErrorCode::kUnavailable, "server_unavailable",
                      "cannot reach the server at " + url + ": " +
                          (error_buf[0] != '\0' ? error_buf : curl_easy_strerror(rc)));
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  auto json = nlohmann::json::parse(response, nullptr, /*allow_exceptions=*/false);
  if (status == 401) {
    return core::Fail(core::ErrorCode::kUnauthenticated, "host_token_refused",
                      "the server at " + url_ +
                          " refused the host token (401): it is wrong or was revoked; register "
                          "the host again (gpuwerk admin hosts add) and pass the new token");
  }
  if (status < 200 || status >= 300) {
    std::string what = "the server at " + url + " answered " + std::to_string(status);
    if (json.is_object()) {
      if (auto c = json.find("code"); c != json.end() && c->is_string()) {
        what += " " + c->get<std::string>();
      }
      if (auto d = json.find("detail"); d != json.end() && d->is_string()) {
        what += ": " + d->get<std::string>();
      }
    }
    return core::Fail(core::ErrorCode::kUnavailable, "server_error", what);
  }
  if (!json.is_object()) {
    return core::Fail(core::ErrorCode::kUnavailable, "bad_sync_response",
                      "the server at " + url + " answered with something not a JSON object");
  }
  return json;
}

}  // namespace gpuwerk::agent
