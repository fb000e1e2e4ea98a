#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace gpuwerk::testing {

/// A stand-in container engine socket for fault tests: it listens on a unix socket of its own and
/// forwards every HTTP request to the real engine's socket, one request per connection
/// (`Connection: close` both ways), except the requests `fail` picks: those get the answer it
/// returns instead (e.g. a 500 as a busy daemon gives), and never reach the engine, or (with
/// AfterForwarding) reach it and get the made-up answer in place of the engine's. Requests are
/// served one at a time, in the order they arrive.
class EngineStandIn {
 public:
  /// Decides per request ("PUT /v1.41/containers/ID/archive?path=/"): "" to forward, or a whole
  /// raw HTTP answer to send back instead.
  using Fault = std::function<std::string(const std::string& method, const std::string& target)>;

  EngineStandIn(std::string listen_path, std::string engine_path, Fault fail)
      : listen_path_(std::move(listen_path)),
        engine_path_(std::move(engine_path)),
        fail_(std::move(fail)) {
    ::unlink(listen_path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = Address(listen_path_);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return;
    }
    thread_ = std::thread([this] { Loop(); });
  }

  ~EngineStandIn() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    ::unlink(listen_path_.c_str());
  }

  EngineStandIn(const EngineStandIn&) = delete;
  EngineStandIn& operator=(const EngineStandIn&) = delete;

  bool ok() const { return listen_fd_ >= 0; }
  /// How many requests got a made-up answer.
  int faults() const { return faults_; }

  /// What a Fault returns to let the request reach the engine but lose the engine's answer on the
  /// way back: the engine acts (e.g. creates the container) and the caller gets `answer` instead.
  static std::string AfterForwarding(const std::string& answer) {
    return std::string(kAfterForwarding) + answer;
  }

  /// A plain HTTP answer with a Docker-style JSON error body.
  static std::string Answer(int status, const std::string& reason, const std::string& message) {
    const std::string body = "{\"message\":\"" + message + "\"}";
    return "HTTP/1.1 " + std::to_string(status) + " " + reason +
           "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }

 private:
  static sockaddr_un Address(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    return addr;
  }

  static bool WriteAll(int fd, const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  void Loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      Serve(client);
      ::close(client);
    }
  }

  /// Reads one request (head and Content-Length body) from `client`; "" when it closed first.
  static std::string ReadRequest(int client) {
    std::string data;
    char buf[16384];
    size_t head_end = std::string::npos;
    size_t need = 0;
    while (true) {
      if (head_end == std::string::npos) {
        head_end = data.find("\r\n\r\n");
        if (head_end != std::string::npos) {
          std::string lower = data.substr(0, head_end);
          for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          const size_t cl = lower.find("\r\ncontent-length:");
          need = head_end + 4 + (cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 17)));
        }
      }
      if (head_end != std::string::npos && data.size() >= need) return data;
      pollfd p{client, POLLIN, 0};
      if (::poll(&p, 1, 30000) <= 0) return "";
      const ssize_t n = ::recv(client, buf, sizeof buf, 0);
      if (n <= 0) return "";
      data.append(buf, static_cast<size_t>(n));
    }
  }

  void Serve(int client) {
    std::string request = ReadRequest(client);
    if (request.empty()) return;
    const size_t line_end = request.find("\r\n");
    const std::string line = request.substr(0, line_end);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = line.find(' ', sp1 + 1);
    const std::string method = line.substr(0, sp1);
    const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string made = fail_ ? fail_(method, target) : "";
    const bool forward_first = made.starts_with(kAfterForwarding);
    if (!made.empty() && !forward_first) {
      ++faults_;
      WriteAll(client, made);
      return;
    }
    // One request per connection to the engine too: it closes after answering.
    request.insert(line_end + 2, "Connection: close\r\n");
    const int engine = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = Address(engine_path_);
    if (::connect(engine, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        WriteAll(engine, request)) {
      char buf[16384];
      while (true) {
        pollfd p{engine, POLLIN, 0};
        if (::poll(&p, 1, 60000) <= 0) break;
        const ssize_t n = ::recv(engine, buf, sizeof buf, 0);
        if (n <= 0) break;
        if (forward_first) continue;  // the engine's answer is lost
        if (!WriteAll(client, std::string(buf, static_cast<size_t>(n)))) break;
      }
    }
    ::close(engine);
    if (forward_first) {
      ++faults_;
      WriteAll(client, made.substr(kAfterForwarding.size()));
    }
  }

  static constexpr std::string_view kAfterForwarding =
      "\x01"
      "after-forwarding\n";

  std::string listen_path_;
  std::string engine_path_;
  Fault fail_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> faults_{0};
  std::thread thread_;
};

}  // namespace gpuwerk::testing
