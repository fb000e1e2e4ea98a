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

/// Owns the io_context, the acceptor, the threads and the set of live connections.
class ServerCore {
 public:
  using Options = HttpServer::Options;

  ServerCore(Options options, Router& router, Metrics& metrics)
      : options_(std::move(options)),
        router_(router),
        metrics_(metrics),
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
  Router& router() { return router_; }
  Metrics& metrics() { return metrics_; }
  const std::shared_ptr<Liveness>& liveness() const { return liveness_; }

 private:
  void DoAccept();
  /// Counts a new connection from `source` (SourceKey; "" for one not counted: a trusted
  /// proxy's) unless that source is at max_connections_per_source; whether it was admitted.
  bool Admit(const std::string& source);
  /// Answers a connection over its source's cap with a 503 and closes it.
  void Refuse(tcp::socket socket, const std::string& source);

  static thread_local const ServerCore* current_;

  const Options options_;
  Router& router_;
  Metrics& metrics_;
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

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::string base_url_;
};

}  // namespace gpuwerk::api::internal
