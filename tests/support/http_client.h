#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace gpuwerk::testing {

/// One HTTP answer as a test sees it.
struct HttpResult {
  long status = 0;
  std::string body;
  std::multimap<std::string, std::string> headers;  ///< names lowercased
  /// The body as JSON (null when it is not JSON).
  nlohmann::json Json() const;
  /// The first value of a header, "" when absent.
  std::string Header(const std::string& lower_name) const;
  /// The problem JSON `code`, or "" when the body is not a problem.
  std::string Code() const;
};

/// How GoogleTest prints an answer in a failure message: the status and the body.
inline void PrintTo(const HttpResult& r, std::ostream* os) {
  *os << "HTTP " << r.status << " " << r.body;
}

/// A small blocking HTTP/1.1 client over libcurl for tests, with a cookie jar of its own
/// (a "browser"). Not thread-safe; make one per thread.
class HttpClient {
 public:
  explicit HttpClient(std::string base_url);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  HttpResult Get(const std::string& path, std::vector<std::string> headers = {});
  HttpResult Head(const std::string& path);
  HttpResult Delete(const std::string& path, std::vector<std::string> headers = {});
  HttpResult PostJson(const std::string& path, const nlohmann::json& body,
                      std::vector<std::string> headers = {});
  HttpResult Post(const std::string& path, const std::string& body, const std::string& content_type,
                  std::vector<std::string> headers = {});
  /// Sends any method with a raw body (a GET too, when `body` is not empty).
  HttpResult Send(const std::string& method, const std::string& path, const std::string& body,
                  std::vector<std::string> headers);

  /// Drops every cookie.
  void ClearCookies();
  /// The value of a cookie in the jar, "" when absent.
  std::string CookieValue(const std::string& name) const;
  /// Sets an Authorization: Bearer header on every request ("" to stop).
  void SetBearer(std::string token) { bearer_ = std::move(token); }
  /// Connects from this local address (e.g. "127.0.0.2", any of 127/8 reaches a loopback
  /// server), so the server sees another source address. Set it before the first request.
  void SetSourceAddress(const std::string& address) { interface_ = "host!" + address; }

 private:
  std::string base_url_;
  std::string bearer_;
  std::string interface_;  ///< CURLOPT_INTERFACE, "" for the default
  void* curl_;             // CURL*
};

}  // namespace gpuwerk::testing
