#include "relay/internal/http_call.h"

#include "core/curl_handles.h"

namespace gpuwerk::relay::internal {
namespace {

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

}  // namespace

core::Result<HttpAnswer> CallJson(std::string_view method, const std::string& url,
                                  const std::string& token, const std::string& json_body,
                                  std::chrono::milliseconds timeout) {
  core::CurlGlobalInitOnce();
  core::CurlEasy curl(curl_easy_init());
  if (!curl) return core::Internal("curl_easy_init failed");
  HttpAnswer answer;
  char error_buf[CURL_ERROR_SIZE] = {};
  const std::string auth = "Authorization: Bearer " + token;
  const std::string verb(method);
  core::CurlList headers(curl_slist_append(nullptr, "Accept: application/json"));
  curl_slist_append(headers.get(), auth.c_str());
  CURL* h = curl.get();
  if (!json_body.empty()) {
    curl_slist_append(headers.get(), "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(json_body.size()));
  }
  if (verb != "GET") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, verb.c_str());
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer.body);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buf);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    return core::Fail(core::ErrorCode::kUnavailable, "server_unavailable",
                      "cannot reach the server at " + url + ": " +
                          (error_buf[0] != '\0' ? error_buf : curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &answer.status);
  return answer;
}

}  // namespace gpuwerk::relay::internal
