#pragma once

#include <curl/curl.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

namespace gpuwerk::testing {

/// The test's own look at a container engine (Docker Engine API over a unix socket, e.g. a
/// podman API service), independent of the product's engine client: raw libcurl requests to
/// versioned paths, so that what a test asserts about containers is what the engine says.
class EngineProbe {
 public:
  struct Answer {
    long status = -1;  ///< -1 when the socket did not answer
    std::string body;
    std::string error;  ///< curl's message when status is -1
    nlohmann::json Json() const { return nlohmann::json::parse(body, nullptr, false); }
  };

  explicit EngineProbe(std::string socket_path) : socket_(std::move(socket_path)) {}

  /// `json_body`, when not empty, is sent as the request's body (application/json).
  Answer Send(const std::string& method, const std::string& path, long timeout_seconds = 20,
              const std::string& json_body = "") const {
    Answer a;
    CURL* c = curl_easy_init();
    if (c == nullptr) return a;
    curl_slist* headers = nullptr;
    if (!json_body.empty()) {
      headers = curl_slist_append(headers, "Content-Type: application/json");
      curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_body.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(json_body.size()));
    }
    const std::string url = "http://localhost" + path;
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket_.c_str());
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_seconds);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Append);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a.body);
    const CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    } else {
      a.error = curl_easy_strerror(rc);
    }
    curl_easy_cleanup(c);
    curl_slist_free_all(headers);
    return a;
  }

  /// Whether the engine answers `GET /_ping` (not `/version`, which podman answers after running
  /// `dpkg-query`: seconds on a loaded machine).
  bool Up() const { return Send("GET", "/_ping", 5).status == 200; }

  /// Every container (any state) carrying `label=value`; a JSON array, or null when the engine
  /// did not answer.
  nlohmann::json ContainersWithLabel(const std::string& label, const std::string& value) const {
    const std::string filters =
        nlohmann::json{{"label", nlohmann::json::array({label + "=" + value})}}.dump();
    Answer a = Send("GET", "/v1.41/containers/json?all=true&filters=" + Escape(filters));
    if (a.status != 200) return nullptr;
    auto j = a.Json();
    return j.is_array() ? j : nlohmann::json();
  }

  /// The engine's inspect of one container (null when it is not there or the engine is away).
  nlohmann::json Inspect(const std::string& id) const {
    Answer a = Send("GET", "/v1.41/containers/" + id + "/json");
    if (a.status != 200) return nullptr;
    return a.Json();
  }

  /// Removes a container, running or not.
  bool ForceRemove(const std::string& id) const {
    const long status = Send("DELETE", "/v1.41/containers/" + id + "?force=true&v=true").status;
    return status == 204 || status == 404;
  }

  static std::string Escape(const std::string& s) {
    std::string out;
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned char ch : s) {
      if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
        out += static_cast<char>(ch);
      } else {
        out += '%';
        out += kHex[ch >> 4];
        out += kHex[ch & 15];
      }
    }
    return out;
  }

 private:
  static size_t Append(char* ptr, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(ptr, size * n);
    return size * n;
  }

  std::string socket_;
};

}  // namespace gpuwerk::testing
