#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/http_server.h"
#include "api/internal/stream_channel.h"
#include "core/error.h"

namespace gpuwerk::api::internal {

namespace asio = boost::asio;
using tcp = boost::asio::ip::tcp;

class Connection;

/// The key a connection from `address` is counted under for max_connections_per_source: the
/// IPv4 address (also for an IPv4-mapped IPv6 peer), or an IPv6 address's /64 as "2001:db8::/64".
std::string SourceKey(const asio::ip::address& address);

/// Tests only: while non-zero, every accept the server starts fails with this errno (e.g. EMFILE)
/// without asking the kernel, so the pending connection stays in the listen backlog as with a
/// real EMFILE. Process-wide; 0 (the default) in production.
std::atomic<int>& AcceptFaultForTests();

/// Owns the io_context, the acceptor, the threads and the set of live connections.
class ServerCore {
 public:
  using Options = HttpServer::Options;

  ServerCore(Options options, Router& router, Metrics& metrics)
      : options_(std::move(options)),
        router_(router),
        metrics_(metrics),
        open_gauge_(metrics.GaugeFor("gpuwerk_http_connections_open",
                                     "HTTP connections open now (admitted, not yet closed)")),
        server_busy_(metrics.CounterFor(
            "gpuwerk_http_connections_refused_total",
            "HTTP connections answered 503 and closed unread, by reason: server_busy "
            "(http_max_connections) or too_many_connections (http_connections_per_source)",
            {{"reason", "server_busy"}})),
        source_busy_(metrics.CounterFor(
            "gpuwerk_http_connections_refused_total",
            "HTTP connections answered 503 and closed unread, by reason: server_busy "
            "(http_max_connections) or too_many_connections (http_connections_per_source)",
            {{"reason", "too_many_connections"}})),
        accept_failures_total_(metrics.CounterFor(
            "gpuwerk_http_accept_failures_total",
            "accept() calls that failed (e.g. EMFILE: out of file descriptors), each followed "
            "by a back-off")),
        acceptor_(asio::make_strand(ioc_)),
        accept_retry_(acceptor_.get_executor()),
        work_(asio::make_work_guard(ioc_)) {}

  core::Result<void> Listen();
  void Run();
  void Stop();
  bool IsIoThread() const { return current_ == this; }
  bool stopping() const { return stopping_.load(); }
  uint16_t port() const { return port_; }
  std::string base_url() const { return base_url_; }

  void Register(const std::shared_ptr<Connection>& connection);
  /// Forgets a connection; `source` is the key Admit counted it under ("" when none).
  void Unregister(Connection* connection, const std::string& source);

  const Options& options() const { return options_; }
  /// The cap on open connections in force (Options::max_connections, or its automatic value).
  size_t max_connections() const { return max_connections_; }
  Router& router() { return router_; }
  Metrics& metrics() { return metrics_; }
  const std::shared_ptr<Liveness>& liveness() const { return liveness_; }

 private:
  enum class Admission { kAdmitted, kServerBusy, kSourceBusy };

  void DoAccept();
  /// An accept failed (e.g. EMFILE, ENFILE): waits, longer each time in a row up to a second,
  /// then accepts again; logs once when failing starts or its reason changes.
  void BackOffAccept(const boost::system::error_code& ec);
  /// Counts a new connection unless the server holds max_connections already, or its `source`
  /// (SourceKey; "" for one not counted per source: a trusted proxy's) is at
  /// max_connections_per_source.
  Admission Admit(const std::string& source);
  /// Answers a connection refused by Admit with a 503 (server_busy or too_many_connections)
  /// without reading from it, and closes it at once (no descriptor outlives this call).
  void Refuse(tcp::socket socket, Admission why, const std::string& source);

  static thread_local const ServerCore* current_;

  const Options options_;
  Router& router_;
  Metrics& metrics_;
  Gauge& open_gauge_;
  Counter& server_busy_;
  Counter& source_busy_;
  Counter& accept_failures_total_;
  std::atomic<bool> stopping_{false};
  const std::shared_ptr<Liveness> liveness_ = std::make_shared<Liveness>();

  std::mutex stop_mu_;  // serialises the blocking part of Stop()
  bool joined_ = false;

  // Declared before ioc_ so that connections destroyed with the io_context can still unregister.
  std::mutex connections_mu_;
  std::condition_variable connections_cv_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;
  std::unordered_map<std::string, size_t> per_source_;        // open connections by SourceKey
  std::chrono::steady_clock::time_point last_refusal_log_{};  // guarded by connections_mu_
  size_t max_connections_ = 0;                                // set before the threads start
  size_t open_ = 0;            // admitted connections not yet unregistered (connections_mu_)
  bool busy_ = false;          // refusing with server_busy since the last log (connections_mu_)
  uint64_t busy_refused_ = 0;  // refused while busy_ (connections_mu_)

  // Accept back-off; touched only on the acceptor's strand.
  uint64_t accept_failures_ = 0;  // failed accepts in a row
  boost::system::error_code accept_error_;
  std::chrono::milliseconds accept_backoff_{0};

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::string base_url_;
};

}  // namespace gpuwerk::api::internal
