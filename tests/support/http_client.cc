#include "tests/support/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <sstream>

namespace gpuwerk::testing {
namespace {

size_t WriteBody(char* ptr, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(ptr, size * n);
  return size * n;
}

size_t WriteHeader(char* ptr, size_t size, size_t n, void* user) {
  std::string line(ptr, size * n);
  auto* headers = static_cast<std::multimap<std::string, std::string>*>(user);
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();  // a new response (after 100-continue)
    return size * n;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  std::string value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
  headers->emplace(name, value);
  return size * n;
}

}  // namespace

nlohmann::json HttpResult::Json() const {
  return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
}

std::string HttpResult::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

std::string HttpResult::Code() const {
  auto j = Json();
  if (!j.is_object() || !j.contains("code") || !j["code"].is_string()) return "";
  return j["code"].get<std::string>();
}

HttpClient::HttpClient(std::string base_url) : base_url_(std::move(base_url)) {
  curl_ = curl_easy_init();
  curl_easy_setopt(static_cast<CURL*>(curl_), CURLOPT_COOKIEFILE, "");  // in-memory jar
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResult HttpClient::Send(const std::string& method, const std::string& path,
                            const std::string& body, std::vector<std::string> headers) {
  CURL* c = static_cast<CURL*>(curl_);
  HttpResult out;
  const std::string url = base_url_ + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOBODY, method == "HEAD" ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, nullptr);
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method == "GET" && body.empty()) {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, nullptr);
  } else {  // any other method, and a GET with a body (which routes must refuse)
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_slist* list = nullptr;
  if (!bearer_.empty()) headers.push_back("Authorization: Bearer " + bearer_);
  headers.push_back("Expect:");
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, WriteHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &out.headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_INTERFACE, interface_.empty() ? nullptr : interface_.c_str());
  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(list);
  if (rc != CURLE_OK) {
    out.status = -1;
    out.body = curl_easy_strerror(rc);
    return out;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out.status);
  return out;
}

HttpResult HttpClient::Get(const std::string& path, std::vector<std::string> headers) {
  return Send("GET", path, "", std::move(headers));
}
HttpResult HttpClient::Head(const std::string& path) { return Send("HEAD", path, "", {}); }
HttpResult HttpClient::Delete(const std::string& path, std::vector<std::string> headers) {
  return Send("DELETE", path, "", std::move(headers));
}
HttpResult HttpClient::PostJson(const std::string& path, const nlohmann::json& body,
                                std::vector<std::string> headers) {
  headers.push_back("Content-Type: application/json");
  return Send("POST", path, body.dump(), std::move(headers));
}
HttpResult HttpClient::Post(const std::string& path, const std::string& body,
                            const std::string& content_type, std::vector<std::string> headers) {
  headers.push_back("Content-Type: " + content_type);
  return Send("POST", path, body, std::move(headers));
}

void HttpClient::ClearCookies() {
  curl_easy_setopt(static_cast<CURL*>(curl_), CURLOPT_COOKIELIST, "ALL");
}

std::string HttpClient::CookieValue(const std::string& name) const {
  curl_slist* cookies = nullptr;
  curl_easy_getinfo(static_cast<CURL*>(curl_), CURLINFO_COOKIELIST, &cookies);
  std::string value;
  for (curl_slist* p = cookies; p; p = p->next) {
    // Netscape format: domain, flag, path, secure, expiry, name, value (tab-separated).
    std::istringstream fields(p->data);
    std::string f[7];
    for (auto& x : f) std::getline(fields, x, '\t');
    if (f[5] == name) value = f[6];
  }
  curl_slist_free_all(cookies);
  return value;
}

}  // namespace gpuwerk::testing
