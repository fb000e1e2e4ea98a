#pragma once
// Test-only: a tiny HTTP/1.1 server on 127.0.0.1 (port 0) that answers each request with a
// handler the test supplies, one connection at a time, `Connection: close`. Enough to drive
// ApiClient and the client verbs hermetically; not for production use.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpuwerk::cli {

/// One request as the fake server received it.
struct FakeRequest {
  std::string method;
  std::string target;                          ///< path and query, e.g. "/api/v1/ssh-keys?page=2"
  std::string path;                            ///< without the query
  std::string query;                           ///< without the "?"
  std::map<std::string, std::string> headers;  ///< names lowercased
  std::string body;

  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
  nlohmann::json Json() const {
    return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  }
};

/// The answer a handler gives.
struct FakeResponse {
  int status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static FakeResponse Json(int status, const nlohmann::json& j) {
    return {status, j.dump(), {{"Content-Type", "application/json"}}};
  }
  static FakeResponse Problem(int status, const std::string& code, const std::string& detail) {
    return {status,
            nlohmann::json{{"type", "about:blank"},
                           {"title", "Error"},
                           {"status", status},
                           {"detail", detail},
                           {"code", code}}
                .dump(),
            {{"Content-Type", "application/problem+json"}}};
  }
  static FakeResponse NoContent() { return {204, "", {}}; }
};

/// See the file comment. Thread-safe; the handler runs on the server's own thread.
class FakeApiServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  explicit FakeApiServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 16);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }

  ~FakeApiServer() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes the blocked accept()
    thread_.join();
    ::close(listen_fd_);
  }

  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  /// Every request received so far, in order.
  std::vector<FakeRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  static std::string Reason(int status) {
    switch (status) {
      case 200:
        return "OK";
      case 201:
        return "Created";
      case 204:
        return "No Content";
      case 400:
        return "Bad Request";
      case 401:
        return "Unauthorized";
      case 404:
        return "Not Found";
      case 409:
        return "Conflict";
      default:
        return "Status";
    }
  }

  void Serve() {
    while (!stopping_) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stopping_) return;
        continue;
      }
      HandleConnection(fd);
      ::close(fd);
    }
  }

  void HandleConnection(int fd) {
    std::string data;
    char buffer[4096];
    size_t header_end = std::string::npos;
    while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      data.append(buffer, static_cast<size_t>(n));
    }
    FakeRequest req;
    std::string head = data.substr(0, header_end);
    size_t line_end = head.find("\r\n");
    std::string request_line = head.substr(0, line_end);
    size_t sp1 = request_line.find(' ');
    size_t sp2 = request_line.find(' ', sp1 + 1);
    req.method = request_line.substr(0, sp1);
    req.target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t q = req.target.find('?');
    req.path = req.target.substr(0, q);
    if (q != std::string::npos) req.query = req.target.substr(q + 1);
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      std::string line = head.substr(pos, end - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        req.headers[name] = value;
      }
      pos = end + 2;
    }
    size_t content_length = 0;
    if (auto it = req.headers.find("content-length"); it != req.headers.end()) {
      content_length = std::stoul(it->second);
    }
    req.body = data.substr(header_end + 4);
    while (req.body.size() < content_length) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return;
      req.body.append(buffer, static_cast<size_t>(n));
    }
    {
      std::lock_guard lock(mu_);
      requests_.push_back(req);
    }
    FakeResponse resp = handler_(req);
    std::string out =
        "HTTP/1.1 " + std::to_string(resp.status) + " " + Reason(resp.status) +
        "\r\nConnection: close\r\nContent-Length: " + std::to_string(resp.body.size()) + "\r\n";
    for (const auto& [name, value] : resp.headers) out += name + ": " + value + "\r\n";
    out += "\r\n" + resp.body;
    std::string_view rest = out;
    while (!rest.empty()) {
      const ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      rest.remove_prefix(static_cast<size_t>(n));
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::vector<FakeRequest> requests_;
  std::thread thread_;
};

}  // namespace gpuwerk::cli
