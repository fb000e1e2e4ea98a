// The only translation unit that includes Boost.Asio/Beast (heavy to compile; see
// notes/machine.md).

#include "api/http_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/logging.h"

namespace gpuwerk::api {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;

/// Bytes read at a time while waiting for the start of a request.
constexpr size_t kFirstReadSize = 4096;
/// After an error answer, how long and how much we read and discard so that the client sees the
/// answer instead of a connection reset (lingering close, RFC 9112 §9.6).
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 16 * 1024 * 1024;

bool IsRequestIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::string NewRequestId() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
           static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  }());
  return fmt::format("{:016x}", rng());
}

std::string RequestIdFrom(std::string_view client_id) {
  if (!client_id.empty() && client_id.size() <= 64 &&
      std::all_of(client_id.begin(), client_id.end(), IsRequestIdChar)) {
    return std::string(client_id);
  }
  return NewRequestId();
}

/// Whether a header name or value can be sent as is (no CR, LF or NUL: response splitting).
bool IsSafeHeaderText(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool IsApiPath(std::string_view path) { return path == "/api" || path.starts_with("/api/"); }

/// Splits "host:port" / "[v6]:port". nullopt when malformed.
std::optional<std::pair<std::string, uint16_t>> SplitHostPort(std::string_view listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view host = listen.substr(0, colon);
  std::string_view port_text = listen.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return std::nullopt;  // an IPv6 literal must be bracketed
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    return std::nullopt;
  }
  return std::make_pair(std::string(host), static_cast<uint16_t>(port));
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// The path and the query (without '?', nullopt when there is none) of a request-target in
/// origin-form ("/p?q") or absolute-form ("http://host/p?q", RFC 9112 §3.2.2).
std::pair<std::string_view, std::optional<std::string_view>> SplitTarget(std::string_view target) {
  if (size_t scheme = target.find("://");
      scheme != std::string_view::npos && !target.starts_with("/")) {
    size_t slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  size_t question = target.find('?');
  if (question == std::string_view::npos) return {target, std::nullopt};
  return {target.substr(0, question), target.substr(question + 1)};
}

std::string ToString(beast::string_view s) { return std::string(s.data(), s.size()); }
std::string_view ToView(beast::string_view s) { return std::string_view(s.data(), s.size()); }

}  // namespace

namespace detail {

class Session;

/// Whether work may still be posted to the server's io_context: streams outlive their
/// connection's threads (a producer may write after Stop), so they check this first. Cleared,
/// under `mu`, once Stop() has joined the I/O threads.
struct Liveness {
  std::mutex mu;
  bool alive = true;
};

/// The ResponseStream a streamed response writes to (see Response::stream). Shared by the
/// producer (any thread) and the Session (its strand); the bytes in between are guarded by `mu_`.
class StreamChannel final : public ResponseStream {
 public:
  StreamChannel(std::weak_ptr<Session> session, std::shared_ptr<Liveness> liveness, size_t limit)
      : session_(std::move(session)), liveness_(std::move(liveness)), limit_(limit) {}

  bool Write(std::string bytes) override {
    std::unique_lock lock(mu_);
    if (ended_) return false;
    if (bytes.empty()) return true;
    if (queued_.size() + in_flight_ + bytes.size() > limit_) {
      aborted_ = true;
      queued_.clear();
      Finish(lock, "overflow");  // unlocks
      return false;
    }
    queued_ += bytes;
    const bool kick = !kick_posted_;
    kick_posted_ = true;
    lock.unlock();
    if (kick) Kick();
    return true;
  }

  void End() override {
    std::unique_lock lock(mu_);
    if (ended_) return;
    end_requested_ = true;
    Finish(lock, "end");
  }

  bool ended() const override {
    std::lock_guard lock(mu_);
    return ended_;
  }

  void OnEnd(std::function<void()> on_end) override {
    if (!on_end) return;
    {
      std::lock_guard lock(mu_);
      if (!ended_) {
        on_end_.push_back(std::move(on_end));
        return;
      }
    }
    on_end();
  }

  // ---- for the Session, on its strand ----

  /// What the Session should do next.
  struct Next {
    std::string bytes;    ///< body bytes to send now (may be empty)
    bool finish = false;  ///< nothing more will come: send the last chunk and close
    bool abort = false;   ///< close without sending more
  };
  /// Takes what is queued (counting it as in flight until Sent()).
  Next Take() {
    std::lock_guard lock(mu_);
    kick_posted_ = false;
    Next next;
    if (aborted_) {
      next.abort = true;
      return next;
    }
    next.bytes = std::move(queued_);
    queued_.clear();
    in_flight_ += next.bytes.size();
    next.finish = end_requested_ && next.bytes.empty();
    return next;
  }
  /// `n` bytes taken by Take() are written to the socket.
  void Sent(size_t n) {
    std::lock_guard lock(mu_);
    in_flight_ -= std::min(n, in_flight_);
    sent_total_ += n;
  }
  /// Ends the stream from the server's side. `graceful`: what is queued is still sent, then the
  /// last chunk (the server is stopping, HEAD); otherwise the connection is closed as it is.
  void EndFromServer(std::string_view reason, bool graceful) {
    std::unique_lock lock(mu_);
    if (ended_) {
      if (!graceful) aborted_ = true;
      return;
    }
    if (graceful) {
      end_requested_ = true;
    } else {
      aborted_ = true;
      queued_.clear();
    }
    Finish(lock, reason);
  }
  /// Why the stream ended ("" while open) and how many body bytes were sent.
  std::pair<std::string, uint64_t> Outcome() const {
    std::lock_guard lock(mu_);
    return {end_reason_, sent_total_};
  }

 private:
  /// Marks the stream ended with `reason`, unlocks, runs the OnEnd callbacks and wakes the
  /// Session so that it finishes.
  void Finish(std::unique_lock<std::mutex>& lock, std::string_view reason) {
    ended_ = true;
    end_reason_ = std::string(reason);
    std::vector<std::function<void()>> callbacks = std::move(on_end_);
    on_end_.clear();
    const bool kick = !kick_posted_;
    kick_posted_ = true;
    lock.unlock();
    for (auto& callback : callbacks) callback();
    if (kick) Kick();
  }
  /// Posts a Flush to the Session's strand (defined after Session).
  void Kick();

  const std::weak_ptr<Session> session_;
  const std::shared_ptr<Liveness> liveness_;
  const size_t limit_;
  mutable std::mutex mu_;
  std::string queued_;
  size_t in_flight_ = 0;
  uint64_t sent_total_ = 0;
  bool ended_ = false;          // no more writes are accepted
  bool end_requested_ = false;  // finish after flushing what is queued
  bool aborted_ = false;        // close without flushing
  bool kick_posted_ = false;    // a Flush is sure to run (posted, or after the write in flight)
  std::string end_reason_;
  std::vector<std::function<void()>> on_end_;
};

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

  void Register(const std::shared_ptr<Session>& session);
  void Unregister(Session* session);

  const Options& options() const { return options_; }
  Router& router() { return router_; }
  Metrics& metrics() { return metrics_; }
  const std::shared_ptr<Liveness>& liveness() const { return liveness_; }

 private:
  void DoAccept();

  static thread_local const ServerCore* current_;

  const Options options_;
  Router& router_;
  Metrics& metrics_;
  std::atomic<bool> stopping_{false};
  const std::shared_ptr<Liveness> liveness_ = std::make_shared<Liveness>();

  std::mutex stop_mu_;  // serialises the blocking part of Stop()
  bool joined_ = false;

  // Declared before ioc_ so that sessions destroyed with the io_context can still unregister.
  std::mutex sessions_mu_;
  std::condition_variable sessions_cv_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::steady_timer accept_retry_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::string base_url_;
};

thread_local const ServerCore* ServerCore::current_ = nullptr;

/// One TCP connection: reads requests one after another, runs them through the Router, writes
/// the responses. All its handlers run on its own strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerCore& server, tcp::socket socket)
      : server_(server), stream_(std::move(socket)), write_timer_(stream_.get_executor()) {
    beast::error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    if (ec) return;
    asio::ip::address address = endpoint.address();
    if (address.is_v6() && address.to_v6().is_v4_mapped()) {  // dual-stack listener
      address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
    }
    peer_ip_ = address.to_string();
  }
  ~Session() {
    if (channel_) {  // torn down with the server's threads, or never closed
      channel_->EndFromServer("server_stopping", /*graceful=*/false);
      if (!stream_logged_) LogStreamEnd();
    }
    server_.Unregister(this);
  }

  void Start() {
    server_.Register(shared_from_this());
    asio::dispatch(stream_.get_executor(),
                   [self = shared_from_this()] { self->WaitForRequest(/*first=*/true); });
  }

  /// Posted by Stop(): closes the connection if it is between requests.
  void OnServerStopping() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::kIdle || self->state_ == State::kLingering) self->Close();
      if (self->state_ == State::kStreaming) {
        // What is queued still goes out, then the last chunk; a client that does not take it
        // is cut when Stop()'s grace runs out.
        self->channel_->EndFromServer("server_stopping", /*graceful=*/true);
        self->Flush();
      }
    });
  }

  /// Posted by the StreamChannel when it has something for this connection.
  void PostFlush() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->Flush(); });
  }

 private:
  enum class State { kIdle, kReading, kHandling, kWriting, kLingering, kStreaming, kClosed };

  void WaitForRequest(bool first) {
    state_ = State::kIdle;
    if (server_.stopping()) return Close();
    if (buffer_.size() > 0) {  // the next request is already buffered (pipelining)
      state_ = State::kReading;
      stream_.expires_after(server_.options().read_timeout);
      return ReadHeader();
    }
    stream_.expires_after(first ? server_.options().read_timeout : server_.options().idle_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadSize),
                            [self = shared_from_this(), first](beast::error_code ec, size_t n) {
                              self->OnFirstBytes(first, ec, n);
                            });
  }

  void OnFirstBytes(bool first, beast::error_code ec, size_t n) {
    if (ec) return Close();  // timeout, client gone, or closed by Stop()
    buffer_.commit(n);
    state_ = State::kReading;
    // A connection's first request has had read_timeout since the accept; a later one gets it
    // from its first byte.
    if (!first) stream_.expires_after(server_.options().read_timeout);
    ReadHeader();
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(
        static_cast<std::uint32_t>(std::min<size_t>(server_.options().header_limit, UINT32_MAX)));
    parser_->body_limit(static_cast<std::uint64_t>(server_.options().body_limit));
    request_started_ = Clock::now();
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    if (parser_->is_done()) return HandleRequest();
    auto& req = parser_->get();
    auto expect = req[http::field::expect];
    if (EqualsIgnoreCase(Trim(ToView(expect)), "100-continue") && req.version() >= 11) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                     req.version());
      http::async_write(stream_, *cont,
                        [self = shared_from_this(), cont](beast::error_code ec, size_t) {
                          if (ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->OnReadError(ec);
                       self->HandleRequest();
                     });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return SendProtocolError(413,
                               core::Error(core::ErrorCode::kPayloadTooLarge, "payload_too_large",
                                           fmt::format("the request body is larger than {} bytes",
                                                       server_.options().body_limit)));
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return SendProtocolError(
          431, core::Error(core::ErrorCode::kInvalidArgument, "header_too_large",
                           fmt::format("the request line and headers are larger than {} bytes",
                                       server_.options().header_limit)));
    }
    bool client_gone = ec == http::error::end_of_stream || ec == http::error::partial_message ||
                       ec == beast::error::timeout || ec == asio::error::operation_aborted ||
                       ec == asio::error::eof || ec == asio::error::connection_reset;
    if (!client_gone &&
        ec.category() == http::make_error_code(http::error::bad_method).category()) {
      return SendProtocolError(400,
                               core::Error(core::ErrorCode::kInvalidArgument, "malformed_request",
                                           "the request is not valid HTTP/1.1: " + ec.message()));
    }
    if (ec == beast::error::timeout) {
      spdlog::debug("http: closing connection from {}: request not received in time", peer_ip_);
    }
    Close();
  }

  /// Answers a request that could not be read whole, then closes the connection.
  void SendProtocolError(int status, const core::Error& error) {
    state_ = State::kHandling;
    const auto& req = parser_->get();
    request_id_ = RequestIdFrom(ToView(req["X-Request-Id"]));
    method_ = ToString(req.method_string());
    path_ = std::string(SplitTarget(ToView(req.target())).first);
    route_ = "unmatched";
    if (!method_.empty() && path_.starts_with("/")) {  // the request line was read
      Request partial;
      partial.method = method_;
      partial.path = path_;
      route_ = server_.router().RouteNameFor(partial);
    }
    Response response = Problem(status, error);
    Send(std::move(response), /*head=*/false, req.version() == 10 ? 10 : 11,
         /*keep_alive=*/false, /*linger=*/true);
  }

  void HandleRequest() {
    state_ = State::kHandling;
    http::request<http::string_body> msg = parser_->release();
    parser_.reset();

    Request request;
    request.method = ToString(msg.method_string());
    request.target = ToString(msg.target());
    auto [path, query_text] = SplitTarget(request.target);
    request.path = std::string(path);
    for (const auto& field : msg) {
      request.headers.emplace_back(ToString(field.name_string()), ToString(field.value()));
    }
    request.body = std::move(msg.body());
    request.remote_address = peer_ip_;
    if (server_.options().trust_forwarded_for) {
      std::string_view xff = request.Header("X-Forwarded-For");
      std::string_view last =
          Trim(xff.substr(xff.rfind(',') == std::string_view::npos ? 0 : xff.rfind(',') + 1));
      beast::error_code ec;
      auto address = asio::ip::make_address(std::string(last), ec);
      if (!last.empty() && !ec) request.remote_address = address.to_string();
    }
    request.request_id = RequestIdFrom(request.Header("X-Request-Id"));
    request_id_ = request.request_id;
    core::ScopedRequestId log_scope(request_id_);  // every log line of this request carries it
    method_ = request.method;
    path_ = request.path;

    Response response;
    std::optional<std::map<std::string, std::string>> query =
        query_text ? ParseQuery(*query_text) : std::map<std::string, std::string>();
    if (!query) {
      route_ = server_.router().RouteNameFor(request);
      response = Problem(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                                     "the query string has a malformed percent-escape"));
    } else {
      request.query = std::move(*query);
      try {
        response = server_.router().Dispatch(request);
      } catch (const std::exception& e) {  // the Router catches handler exceptions; this is
                                           // for failures around them (e.g. bad_alloc)
        spdlog::error("http: dispatch failed: request_id={} exception={}", request_id_, e.what());
        response = Problem(core::Error(core::ErrorCode::kInternal, "internal", "internal error"));
      }
      route_ = request.route.empty() ? "unmatched" : request.route;
    }
    bool keep_alive = msg.keep_alive() && !server_.stopping();
    const bool head = request.method == "HEAD";
    if (response.stream) {
      if (response.status >= 200 && response.status <= 299 && !response.deferred) {
        return StartStream(std::move(response), head, msg.version());
      }
      response.stream = nullptr;  // an error answer is an ordinary response
    }
    if (response.deferred) {
      // A long poll: the answer comes later, from any thread, onto this connection's strand.
      auto deferred = std::move(response.deferred);
      deferred([self = shared_from_this(), head, version = msg.version(),
                keep_alive](Response later) mutable {
        asio::post(self->stream_.get_executor(),
                   [self, later = std::move(later), head, version, keep_alive]() mutable {
                     later.deferred = nullptr;
                     later.stream = nullptr;  // a long poll's answer is not streamed
                     self->Send(std::move(later), head, version,
                                keep_alive && !self->server_.stopping(), /*linger=*/false);
                   });
      });
      return;
    }
    Send(std::move(response), head, msg.version(), keep_alive, /*linger=*/false);
  }

  /// Converts `response` to Beast, adds the default headers and writes it.
  void Send(Response response, bool head, unsigned version, bool keep_alive, bool linger) {
    if (response.status < 200 || response.status > 599) {
      spdlog::error("http: handler for route {} returned status {}; answering 500", route_,
                    response.status);
      response = Problem(core::Error(core::ErrorCode::kInternal, "internal", "internal error"));
    }
    status_ = response.status;
    auto msg = std::make_shared<http::response<http::string_body>>();
    msg->version(version);
    msg->result(static_cast<unsigned>(response.status));
    ApplyHeaders(response, *msg);
    if (IsApiPath(path_) && msg->find(http::field::cache_control) == msg->end()) {
      msg->set(http::field::cache_control, "no-store");
    }
    msg->keep_alive(keep_alive);
    int status = response.status;
    if (status == 204 || status == 304) {
      response.body.clear();
    }
    msg->body() = std::move(response.body);
    msg->prepare_payload();
    if (head) {
      auto bodiless = std::make_shared<http::response<http::empty_body>>(std::move(msg->base()));
      return Write(std::move(bodiless), keep_alive, linger);
    }
    Write(std::move(msg), keep_alive, linger);
  }

  /// Copies the handler's headers onto `msg` (dropping unsafe ones and those the server sets
  /// itself) and adds `Server`, `X-Content-Type-Options` and `X-Request-Id`.
  template <class Message>
  void ApplyHeaders(const Response& response, Message& msg) {
    for (const auto& [name, value] : response.headers) {
      if (name.empty() || !IsSafeHeaderText(name) || !IsSafeHeaderText(value) ||
          EqualsIgnoreCase(name, "Content-Length") || EqualsIgnoreCase(name, "Transfer-Encoding") ||
          EqualsIgnoreCase(name, "Connection")) {
        spdlog::error("http: dropping response header '{}' from route {}",
                      IsSafeHeaderText(name) ? name : "(unsafe)", route_);
        continue;
      }
      msg.insert(name, value);
    }
    if (msg.find(http::field::server) == msg.end()) msg.set(http::field::server, "gpuwerk");
    msg.set("X-Content-Type-Options", "nosniff");
    msg.set("X-Request-Id", request_id_);
  }

  // ---- streamed responses (Response::stream) ----

  /// Sends the header of a streamed response and hands the producer its stream.
  void StartStream(Response response, bool head, unsigned version) {
    state_ = State::kStreaming;
    status_ = response.status;
    head_ = head;
    chunked_ = version >= 11;
    auto msg = std::make_shared<http::response<http::empty_body>>();
    msg->version(version);
    msg->result(static_cast<unsigned>(response.status));
    ApplyHeaders(response, *msg);
    if (msg->find(http::field::content_type) == msg->end()) {
      msg->set(http::field::content_type, "text/event-stream");
    }
    if (msg->find(http::field::cache_control) == msg->end()) {
      msg->set(http::field::cache_control, "no-store");
    }
    msg->set("X-Accel-Buffering", "no");  // reverse proxies (nginx): pass each chunk on at once
    msg->keep_alive(false);
    if (chunked_) msg->chunked(true);

    channel_ = std::make_shared<StreamChannel>(weak_from_this(), server_.liveness(),
                                               server_.options().stream_buffer_limit);
    if (head) {
      channel_->EndFromServer("head", /*graceful=*/true);
    } else if (server_.stopping()) {
      channel_->EndFromServer("server_stopping", /*graceful=*/true);
    }
    // Counted when the header goes out (the histogram measures time to the first byte); logged
    // when the stream ends.
    const double seconds = std::chrono::duration<double>(Clock::now() - request_started_).count();
    server_.metrics().ObserveHttpRequest(route_, method_, status_, seconds);

    stream_.expires_never();  // the stream's own write timer takes over
    writing_ = true;
    ArmWriteTimer();
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*msg);
    http::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), msg, serializer](beast::error_code ec, size_t) {
          self->OnStreamWritten(ec, 0, /*last=*/false);
        });
    auto producer = std::move(response.stream);
    try {
      producer(channel_);
    } catch (const std::exception& e) {
      spdlog::error("http: stream producer for route {} threw: {}", route_, e.what());
      channel_->End();
    }
  }

  /// Sends what the producer queued, or the end of the stream.
  void Flush() {
    if (state_ != State::kStreaming || writing_) return;
    StreamChannel::Next next = channel_->Take();
    if (next.abort || head_) return Close();
    if (!next.bytes.empty()) {
      const size_t payload = next.bytes.size();
      auto data = std::make_shared<std::string>();
      if (chunked_) {
        *data = fmt::format("{:x}\r\n", payload);  // RFC 9112 §7.1
        *data += next.bytes;
        *data += "\r\n";
      } else {
        *data = std::move(next.bytes);
      }
      return WriteStream(std::move(data), payload, /*last=*/false);
    }
    if (next.finish) {
      if (!chunked_) return Close();  // HTTP/1.0: the close ends the body
      return WriteStream(std::make_shared<std::string>("0\r\n\r\n"), 0, /*last=*/true);
    }
  }

  void WriteStream(std::shared_ptr<std::string> data, size_t payload, bool last) {
    writing_ = true;
    ArmWriteTimer();
    asio::async_write(
        stream_, asio::buffer(*data),
        [self = shared_from_this(), data, payload, last](beast::error_code ec, size_t) {
          self->OnStreamWritten(ec, payload, last);
        });
  }

  void OnStreamWritten(beast::error_code ec, size_t payload, bool last) {
    writing_ = false;
    ++write_seq_;
    write_timer_.cancel();
    if (state_ != State::kStreaming) return;
    if (ec) {
      channel_->EndFromServer("client_gone", /*graceful=*/false);
      return Close();
    }
    channel_->Sent(payload);
    if (last) return Close();
    if (!watching_ && !head_) WatchStreamingConnection();
    Flush();
  }

  /// Reads (and ignores) what the client sends while its stream is open, to notice when it
  /// goes away.
  void WatchStreamingConnection() {
    watching_ = true;
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(kFirstReadSize),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (self->state_ != State::kStreaming) return;
                              if (ec) {
                                self->channel_->EndFromServer("client_gone", /*graceful=*/false);
                                return self->Close();
                              }
                              self->WatchStreamingConnection();
                            });
  }

  /// A write that the client does not take within read_timeout ends the stream.
  void ArmWriteTimer() {
    const uint64_t seq = ++write_seq_;
    write_timer_.expires_after(server_.options().read_timeout);
    write_timer_.async_wait([self = shared_from_this(), seq](beast::error_code ec) {
      if (ec || seq != self->write_seq_ || !self->writing_ || self->state_ != State::kStreaming) {
        return;
      }
      self->channel_->EndFromServer("write_timeout", /*graceful=*/false);
      self->Close();
    });
  }

  /// The access-log line of a stream, when it ends.
  void LogStreamEnd() {
    stream_logged_ = true;
    auto [reason, bytes] = channel_->Outcome();
    const double seconds = std::chrono::duration<double>(Clock::now() - request_started_).count();
    core::ScopedRequestId log_scope(request_id_);
    spdlog::info(
        "http method={} route={} status={} duration_ms={:.1f} remote={} stream_end={} bytes={}",
        method_.empty() ? "-" : method_, route_, status_, seconds * 1000, peer_ip_,
        reason.empty() ? "client_gone" : reason, bytes);
  }

  template <class Message>
  void Write(std::shared_ptr<Message> msg, bool keep_alive, bool linger) {
    // Logged and counted before the write so that a client that has seen the response also sees
    // it in /metrics.
    double seconds = std::chrono::duration<double>(Clock::now() - request_started_).count();
    server_.metrics().ObserveHttpRequest(route_, method_, status_, seconds);
    core::ScopedRequestId log_scope(request_id_);  // the line starts with request_id=…
    // Host agents sync every few seconds and hold a long poll open: their successful calls are
    // logged at debug level so that they do not bury everything else.
    const auto level = route_.starts_with("/api/v1/agent/") && status_ < 400 ? spdlog::level::debug
                                                                             : spdlog::level::info;
    spdlog::log(level, "http method={} route={} status={} duration_ms={:.1f} remote={}",
                method_.empty() ? "-" : method_, route_, status_, seconds * 1000, peer_ip_);
    state_ = State::kWriting;
    stream_.expires_after(server_.options().read_timeout);
    http::async_write(
        stream_, *msg,
        [self = shared_from_this(), msg, keep_alive, linger](beast::error_code ec, size_t) {
          self->OnWritten(ec, keep_alive, linger);
        });
  }

  void OnWritten(beast::error_code ec, bool keep_alive, bool linger) {
    if (ec) return Close();
    if (linger) return Linger();
    if (!keep_alive) return Close();
    WaitForRequest(/*first=*/false);
  }

  /// Half-closes, then reads and discards what the client still sends (e.g. the rest of an
  /// oversized body) for a short while, so it gets to read our answer.
  void Linger() {
    state_ = State::kLingering;
    if (server_.stopping()) return Close();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTime);
    buffer_.clear();
    Drain();
  }

  void Drain() {
    stream_.async_read_some(buffer_.prepare(kFirstReadSize),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kLingerBytes) return self->Close();
                              self->buffer_.clear();
                              self->Drain();
                            });
  }

  void Close() {
    if (state_ == State::kClosed) return;
    const bool streaming = state_ == State::kStreaming;
    state_ = State::kClosed;
    if (streaming) {
      channel_->EndFromServer("client_gone", /*graceful=*/false);  // no-op when already ended
      write_timer_.cancel();
      LogStreamEnd();
    }
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  ServerCore& server_;
  beast::tcp_stream stream_;
  asio::steady_timer write_timer_;  // a streamed response's write deadline
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kIdle;
  std::string peer_ip_ = "-";
  size_t drained_ = 0;
  // The request being answered, for the access log and metrics.
  Clock::time_point request_started_ = Clock::now();
  std::string request_id_;
  std::string method_;
  std::string path_;
  std::string route_ = "unmatched";
  int status_ = 0;
  // A streamed response (state kStreaming).
  std::shared_ptr<StreamChannel> channel_;
  bool head_ = false;
  bool chunked_ = false;
  bool writing_ = false;   // a write (the header, or body bytes) is in flight
  bool watching_ = false;  // a read watching for the client going away is in flight
  bool stream_logged_ = false;
  uint64_t write_seq_ = 0;
};

void StreamChannel::Kick() {
  std::shared_ptr<Session> session;  // released after the lock, should it be the last owner
  std::lock_guard lock(liveness_->mu);
  if (!liveness_->alive) return;
  session = session_.lock();
  if (session) session->PostFlush();
}

core::Result<void> ServerCore::Listen() {
  auto fail = [&](const std::string& why) {
    return core::Fail(core::ErrorCode::kUnavailable, "listen_failed",
                      fmt::format("cannot listen on '{}': {}", options_.listen, why));
  };
  auto host_port = SplitHostPort(options_.listen);
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
  spdlog::info("http: listening on {}", base_url_);
}

void ServerCore::DoAccept() {
  acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor_.is_open() || ec == asio::error::operation_aborted) return;
    if (ec) {
      // E.g. out of file descriptors: wait a little instead of spinning.
      spdlog::warn("http: accept failed: {}", ec.message());
      accept_retry_.expires_after(std::chrono::milliseconds(100));
      accept_retry_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec && acceptor_.is_open()) DoAccept();
      });
      return;
    }
    if (!stopping_) std::make_shared<Session>(*this, std::move(socket))->Start();
    DoAccept();
  });
}

void ServerCore::Register(const std::shared_ptr<Session>& session) {
  std::lock_guard lock(sessions_mu_);
  sessions_.emplace(session.get(), session);
}

void ServerCore::Unregister(Session* session) {
  std::lock_guard lock(sessions_mu_);
  sessions_.erase(session);
  if (sessions_.empty()) sessions_cv_.notify_all();
}

void ServerCore::Stop() {
  if (!stopping_.exchange(true)) {
    asio::post(acceptor_.get_executor(), [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
      accept_retry_.cancel();
    });
    std::vector<std::shared_ptr<Session>> live;
    {
      std::lock_guard lock(sessions_mu_);
      for (auto& [ptr, weak] : sessions_) {
        if (auto s = weak.lock()) live.push_back(std::move(s));
      }
    }
    for (auto& s : live) s->OnServerStopping();
  }
  if (IsIoThread()) return;  // cannot wait for ourselves; the destructor finishes

  std::lock_guard stop_lock(stop_mu_);
  if (joined_) return;
  {
    std::unique_lock lock(sessions_mu_);
    sessions_cv_.wait_for(lock, options_.stop_grace, [this] { return sessions_.empty(); });
    if (!sessions_.empty()) {
      spdlog::warn("http: stopping with {} connection(s) still busy after {} ms", sessions_.size(),
                   options_.stop_grace.count());
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

}  // namespace detail

/// The pimpl of HttpServer (kept a distinct name so that Session can name ServerCore).
class HttpServer::Impl : public detail::ServerCore {
 public:
  using ServerCore::ServerCore;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  GPUWERK_CHECK(!impl_->IsIoThread());
  impl_->Stop();
}

core::Result<std::unique_ptr<HttpServer>> HttpServer::Start(Options options, Router& router,
                                                            Metrics& metrics) {
  if (options.threads < 1 || options.body_limit == 0 || options.header_limit == 0 ||
      options.stream_buffer_limit == 0 || options.read_timeout.count() <= 0 ||
      options.idle_timeout.count() <= 0) {
    return core::InvalidArgument("invalid_option",
                                 "HTTP server options: threads, limits and timeouts must be "
                                 "positive");
  }
  auto impl = std::make_unique<Impl>(std::move(options), router, metrics);
  GPUWERK_TRY(impl->Listen());
  impl->Run();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port(); }

std::string HttpServer::base_url() const { return impl_->base_url(); }

void HttpServer::Stop() { impl_->Stop(); }

void AddOperationalRoutes(Router& router, Metrics& metrics) {
  router.Add("GET", "/healthz", [](Request&) { return Response::Json(200, {{"status", "ok"}}); });
  router.Add("GET", "/metrics", [&metrics](Request&) {
    return Response::Text(200, metrics.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace gpuwerk::api
