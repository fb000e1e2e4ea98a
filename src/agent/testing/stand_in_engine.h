#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpuwerk::agent::testing {

/// A stand-in for a container engine in tests: a unix socket HTTP/1.1 server on one thread that
/// answers each request with `respond(request_line)` (a whole HTTP response), or, when `respond`
/// is empty, accepts connections and never answers (a wedged engine, case C11). Records the
/// request lines and bodies it saw. Stops and closes everything in the destructor. Test-only.
class StandInEngine {
 public:
  using Responder = std::function<std::string(const std::string& request_line)>;

  StandInEngine(std::string socket_path, Responder respond)
      : path_(std::move(socket_path)), respond_(std::move(respond)) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ::unlink(path_.c_str());
    ok_ = listen_fd_ >= 0 &&
          ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(listen_fd_, 16) == 0;
    thread_ = std::thread([this] { Serve(); });
  }
  ~StandInEngine() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  StandInEngine(const StandInEngine&) = delete;
  StandInEngine& operator=(const StandInEngine&) = delete;

  /// Whether the socket is listening.
  bool ok() const { return ok_; }
  /// The request lines seen so far, e.g. "GET /v1.41/_ping HTTP/1.1".
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  /// The request bodies seen so far, in the order of requests() ("" for none).
  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    return bodies_;
  }

  /// An HTTP response with a JSON body.
  static std::string Json(int status, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) +
           " X\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      if (!respond_) {
        held_.push_back(fd);  // wedged: read nothing, answer nothing, keep it open
        continue;
      }
      std::string request = ReadRequest(fd);
      const std::string line = request.substr(0, request.find("\r\n"));
      {
        std::lock_guard lock(mu_);
        requests_.push_back(line);
        const size_t head_end = request.find("\r\n\r\n");
        bodies_.push_back(head_end == std::string::npos ? "" : request.substr(head_end + 4));
      }
      const std::string response = respond_(line);
      size_t sent = 0;
      while (sent < response.size()) {
        const ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      ::close(fd);
    }
  }

  /// Reads the head and a Content-Length body (enough for what DockerEngine sends).
  static std::string ReadRequest(int fd) {
    std::string data;
    char buf[4096];
    size_t need = std::string::npos;
    while (data.size() < need) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
      const size_t head_end = data.find("\r\n\r\n");
      if (need == std::string::npos && head_end != std::string::npos) {
        size_t length = 0;
        for (const char* name : {"Content-Length: ", "content-length: "}) {
          const size_t at = data.find(name);
          if (at != std::string::npos && at < head_end) {
            length = std::stoul(data.substr(at + std::strlen(name)));
          }
        }
        need = head_end + 4 + length;
      }
    }
    return data;
  }

  std::string path_;
  Responder respond_;
  int listen_fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::vector<std::string> bodies_;
  std::thread thread_;
};

}  // namespace gpuwerk::agent::testing
