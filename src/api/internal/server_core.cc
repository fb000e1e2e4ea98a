#include "api/internal/server_core.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

#include "api/internal/connection.h"
#include "api/listen_address.h"
#include "core/open_files.h"

namespace gpuwerk::api::internal {
namespace {

namespace beast = boost::beast;

}  // namespace

thread_local const ServerCore* ServerCore::current_ = nullptr;

std::atomic<int>& AcceptFaultForTests() {
  static std::atomic<int> fault{0};
  return fault;
}

core::Result<void> ServerCore::Listen() {
  auto fail = [&](const std::string& why) {
    return core::Fail(core::ErrorCode::kUnavailable, "listen_failed",
                      fmt::format("cannot listen on '{}': {}", options_.listen, why));
  };
  auto host_port = SplitListenAddress(options_.listen);
  if (!host_port) return fail("expected host:port, e.g. 127.0.0.1:8080 or [::1]:8080");
  auto& [host, port] = *host_port;

  beast::error_code ec;
  tcp::endpoint endpoint;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return fail("cannot resolve host '" + host + "'" + (ec ? ": " + ec.message() : ""));
    }
    endpoint = results.begin()->endpoint();
  }

  acceptor_.open(endpoint.protocol(), ec);
  if (ec) return fail(ec.message());
  // Not inherited by processes we start (e.g. `gpuwerk up`'s podman service, whose containers
  // outlive us and would keep the port taken).
  ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
  acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return fail(ec.message());
  acceptor_.bind(endpoint, ec);
  if (ec == asio::error::address_in_use) {
    return fail(ec.message() + " (is another server running there? pick another --listen)");
  }
  if (ec) return fail(ec.message());
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(ec.message());
  tcp::endpoint bound = acceptor_.local_endpoint(ec);
  if (ec) return fail(ec.message());
  port_ = bound.port();

  asio::ip::address url_address = bound.address();
  if (url_address.is_unspecified()) {
    url_address = url_address.is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                                      : asio::ip::address(asio::ip::address_v4::loopback());
  }
  base_url_ = url_address.is_v6() ? fmt::format("http://[{}]:{}", url_address.to_string(), port_)
                                  : fmt::format("http://{}:{}", url_address.to_string(), port_);
  return {};
}

void ServerCore::Run() {
  const uint64_t fd_limit = core::OpenFileSoftLimit();
  max_connections_ = options_.max_connections != 0 ? options_.max_connections
                                                   : core::DefaultMaxConnections(fd_limit);
  if (fd_limit != UINT64_MAX && max_connections_ + 64 > fd_limit) {
    spdlog::warn(
        "http: max_connections {} leaves fewer than 64 of the {} file descriptors the process may "
        "open: accepts may fail with EMFILE before the cap answers 503",
        max_connections_, fd_limit);
  }
  asio::dispatch(acceptor_.get_executor(), [this] { DoAccept(); });
  threads_.reserve(options_.threads);
  for (int i = 0; i < options_.threads; ++i) {
    threads_.emplace_back([this] {
      current_ = this;
      while (true) {
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("http: uncaught exception on an I/O thread: {}", e.what());
        }
      }
    });
  }
  spdlog::info("http: listening on {} (at most {} connections; open-file limit {})", base_url_,
               max_connections_,
               fd_limit == UINT64_MAX ? std::string("unlimited") : std::to_string(fd_limit));
}

void ServerCore::DoAccept() {
  if (const int fault = AcceptFaultForTests().load(); fault != 0) {
    asio::post(acceptor_.get_executor(), [this, fault] {
      if (acceptor_.is_open()) {
        BackOffAccept(beast::error_code(fault, boost::system::system_category()));
      }
    });
    return;
  }
  acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open() || ec == asio::error::operation_aborted) return;
    if (ec) return BackOffAccept(ec);
    if (accept_failures_ > 0) {
      spdlog::info("http: accepting again after {} failed accept(s) ({})", accept_failures_,
                   accept_error_.message());
      accept_failures_ = 0;
      accept_error_ = {};
      accept_backoff_ = std::chrono::milliseconds(0);
    }
    // The next accept is posted before this connection is served, so it is waiting by the time
    // any answer leaves (the accept-fault test relies on that; before, a loaded machine could
    // answer this connection first). Admit and Refuse lock what they share.
    DoAccept();
    if (!stopping_) {
      beast::error_code peer_ec;
      const auto peer = socket.remote_endpoint(peer_ec);
      // A trusted proxy's connections carry many clients: not counted against its own cap.
      const bool uncounted =
          peer_ec || options_.trusted_proxies.Contains(peer.address().to_string());
      const std::string source = uncounted ? "" : SourceKey(peer.address());
      if (const Admission admission = Admit(source); admission == Admission::kAdmitted) {
        std::make_shared<Connection>(*this, std::move(socket), source)->Start();
      } else {
        Refuse(std::move(socket), admission, source);
      }
    }
  });
}

void ServerCore::BackOffAccept(const boost::system::error_code& ec) {
  // Out of file descriptors (EMFILE, ENFILE) or kernel memory: the pending connection stays in
  // the backlog and accepting again at once would fail again, so wait, longer each time.
  if (accept_failures_ == 0 || ec != accept_error_) {
    size_t open = 0;
    {
      std::lock_guard lock(connections_mu_);
      open = open_;
    }
    spdlog::warn(
        "http: accept failed: {}; retrying with back-off up to 1 s ({} connections open, "
        "max_connections {}, open-file limit {})",
        ec.message(), open, max_connections_, core::OpenFileSoftLimit());
  }
  ++accept_failures_;
  accept_failures_total_.Increment();
  accept_error_ = ec;
  accept_backoff_ = std::clamp(accept_backoff_ * 2, std::chrono::milliseconds(10),
                               std::chrono::milliseconds(1000));
  accept_retry_.expires_after(accept_backoff_);
  accept_retry_.async_wait([this](beast::error_code wait_ec) {
    if (!wait_ec && acceptor_.is_open()) DoAccept();
  });
}

void ServerCore::Register(const std::shared_ptr<Connection>& connection) {
  std::lock_guard lock(connections_mu_);
  connections_.emplace(connection.get(), connection);
}

ServerCore::Admission ServerCore::Admit(const std::string& source) {
  std::lock_guard lock(connections_mu_);
  if (open_ >= max_connections_) {
    if (!busy_) {
      busy_ = true;
      busy_refused_ = 0;
      spdlog::warn(
          "http: {} connections open: refusing new ones with 503 server_busy until one closes "
          "(max_connections)",
          open_);
    }
    ++busy_refused_;
    server_busy_.Increment();
    return Admission::kServerBusy;
  }
  if (!source.empty() && options_.max_connections_per_source != 0) {
    size_t& from_source = per_source_[source];
    if (from_source >= options_.max_connections_per_source) {
      source_busy_.Increment();
      return Admission::kSourceBusy;
    }
    ++from_source;
  }
  ++open_;
  open_gauge_.Set(static_cast<double>(open_));
  return Admission::kAdmitted;
}

void ServerCore::Refuse(tcp::socket socket, Admission why, const std::string& source) {
  if (why == Admission::kSourceBusy) {
    std::lock_guard lock(connections_mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_refusal_log_ >= std::chrono::minutes(1)) {
      last_refusal_log_ = now;
      spdlog::warn("http: refusing connections from {}: {} are open (max_connections_per_source)",
                   source, options_.max_connections_per_source);
    }
  }
  const auto answer = [](std::string_view code, std::string_view detail) {
    const std::string body =
        fmt::format(R"({{"type":"about:blank","title":"Service Unavailable","status":503,)"
                    R"("code":"{}","detail":"{}","retry_after_seconds":1}})",
                    code, detail);
    return fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nServer: gpuwerk\r\nContent-Type: "
        "application/problem+json\r\nX-Content-Type-Options: nosniff\r\nRetry-After: "
        "1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
        body.size(), body);
  };
  static const std::string kSourceBusy =
      answer("too_many_connections",
             "Too many connections are open from your address; close some and try again.");
  static const std::string kServerBusy =
      answer("server_busy", "The server has too many connections open; try again in a moment.");
  // Written at once, without waiting and before anything is read, so that a flood of refused
  // connections holds no descriptor: a fresh socket's send buffer takes these few hundred bytes.
  // A client that already sent its request may see the connection reset instead, which says the
  // same.
  beast::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.write_some(asio::buffer(why == Admission::kServerBusy ? kServerBusy : kSourceBusy),
                    ignored);
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

std::string SourceKey(const asio::ip::address& address) {
  if (address.is_v4()) return address.to_v4().to_string();
  const asio::ip::address_v6 v6 = address.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string();
  asio::ip::address_v6::bytes_type bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return asio::ip::address_v6(bytes).to_string() + "/64";
}

void ServerCore::Unregister(Connection* connection, const std::string& source) {
  std::lock_guard lock(connections_mu_);
  if (!source.empty()) {
    auto it = per_source_.find(source);
    if (it != per_source_.end() && --it->second == 0) per_source_.erase(it);
  }
  if (open_ > 0) --open_;
  open_gauge_.Set(static_cast<double>(open_));
  if (busy_ && open_ < max_connections_) {
    busy_ = false;
    spdlog::info("http: accepting connections again ({} refused with server_busy meanwhile)",
                 busy_refused_);
  }
  connections_.erase(connection);
  if (connections_.empty()) connections_cv_.notify_all();
}

void ServerCore::Stop() {
  if (!stopping_.exchange(true)) {
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      accept_retry_.cancel();
    });
    std::vector<std::shared_ptr<Connection>> live;
    {
      std::lock_guard lock(connections_mu_);
      for (auto& [ptr, weak] : connections_) {
        if (auto s = weak.lock()) live.push_back(std::move(s));
      }
    }
    for (auto& s : live) s->OnServerStopping();
  }
  if (IsIoThread()) return;  // cannot wait for ourselves; the destructor finishes

  std::lock_guard stop_lock(stop_mu_);
  if (joined_) return;
  {
    std::unique_lock lock(connections_mu_);
    connections_cv_.wait_for(lock, options_.stop_grace, [this] { return connections_.empty(); });
    if (!connections_.empty()) {
      spdlog::warn("http: stopping with {} connection(s) still busy after {} ms",
                   connections_.size(), options_.stop_grace.count());
    }
  }
  work_.reset();
  ioc_.stop();  // a handler still running finishes first; join waits for it
  for (auto& t : threads_) t.join();
  joined_ = true;
  {
    std::lock_guard lock(liveness_->mu);  // streams' producers post nothing from now on
    liveness_->alive = false;
  }
  // The threads are gone: close the listening socket here in case the posted close never ran.
  beast::error_code ignored;
  acceptor_.close(ignored);
  spdlog::info("http: stopped listening on {}", base_url_);
}

}  // namespace gpuwerk::api::internal
