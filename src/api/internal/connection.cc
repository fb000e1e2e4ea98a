#include "api/internal/connection.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <exception>
#include <map>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

#include "api/client_address.h"
#include "core/logging.h"
#include "core/strings.h"

namespace gpuwerk::api::internal {
namespace {

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

Connection::Connection(ServerCore& server, tcp::socket socket, std::string source)
    : source_(std::move(source)),
      server_(server),
      stream_(std::move(socket)),
      write_timer_(stream_.get_executor()) {
  beast::error_code ec;
  auto endpoint = stream_.socket().remote_endpoint(ec);
  if (ec) return;
  asio::ip::address address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {  // dual-stack listener
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  peer_ip_ = address.to_string();
  peer_trusted_ = server.options().trusted_proxies.Contains(peer_ip_);
  client_ip_ = peer_ip_;
}

Connection::~Connection() {
  if (channel_) {  // torn down with the server's threads, or never closed
    channel_->EndFromServer("server_stopping", /*graceful=*/false);
    if (!stream_logged_) LogStreamEnd();
  }
  server_.Unregister(this, source_);
}

void Connection::Start() {
  server_.Register(shared_from_this());
  asio::dispatch(stream_.get_executor(),
                 [self = shared_from_this()] { self->WaitForRequest(/*first=*/true); });
}

void Connection::OnServerStopping() {
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

void Connection::PostFlush() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->Flush(); });
}

void Connection::WaitForRequest(bool first) {
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

void Connection::OnFirstBytes(bool first, beast::error_code ec, size_t n) {
  if (ec) return Close();  // timeout, client gone, or closed by Stop()
  buffer_.commit(n);
  state_ = State::kReading;
  // A connection's first request has had read_timeout since the accept; a later one gets it
  // from its first byte.
  if (!first) stream_.expires_after(server_.options().read_timeout);
  ReadHeader();
}

void Connection::ReadHeader() {
  parser_.emplace();
  parser_->header_limit(
      static_cast<std::uint32_t>(std::min<size_t>(server_.options().header_limit, UINT32_MAX)));
  parser_->body_limit(static_cast<std::uint64_t>(server_.options().body_limit));
  request_started_ = Clock::now();
  client_ip_ = peer_ip_;  // until this request's own X-Forwarded-For is read
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
}

void Connection::OnHeader(beast::error_code ec) {
  if (ec) return OnReadError(ec);
  // RFC 9112 §3.2: an HTTP/1.1 request without a Host field, any request with more than one, and
  // any whose Host is not a valid "host[:port]" (RFC 3986 §3.2.2, as ParseHostAndPort reads it)
  // is answered 400 (before its body is read).
  const auto& fields = parser_->get();
  const size_t hosts = fields.count(http::field::host);
  if (hosts > 1 || (hosts == 0 && fields.version() >= 11)) {
    return SendProtocolError(
        400, core::Error(core::ErrorCode::kInvalidArgument, "invalid_host",
                         hosts > 1 ? "the request has more than one Host header field"
                                   : "an HTTP/1.1 request needs a Host header field"));
  }
  if (hosts == 1 && !ParseHostAndPort(ToView(fields[http::field::host]))) {
    return SendProtocolError(
        400, core::Error(core::ErrorCode::kInvalidArgument, "invalid_host",
                         "the Host header field is not a host name or address with an optional "
                         "port (e.g. example.com:8080)"));
  }
  // Origin and Referer are what the cross-site check reads (Authenticator::CheckOrigin); each is
  // one value (RFC 6454 §7, RFC 9110 §10.1.3), so two are refused rather than one believed.
  for (const auto field : {http::field::origin, http::field::referer}) {
    if (fields.count(field) > 1) {
      return SendProtocolError(
          400, core::Error(core::ErrorCode::kInvalidArgument, "invalid_origin",
                           fmt::format("the request has more than one {} header field",
                                       ToView(http::to_string(field)))));
    }
  }
  // Authorization holds one set of credentials (RFC 9110 §11.6.2): with two, which one a
  // handler, a proxy or a log reads is a guess, so the request is refused before any is tried.
  if (fields.count(http::field::authorization) > 1) {
    return SendProtocolError(
        400, core::Error(core::ErrorCode::kInvalidArgument, "duplicate_authorization",
                         "the request has more than one Authorization header field; send one"));
  }
  if (parser_->is_done()) return HandleRequest();
  auto& req = parser_->get();
  auto expect = req[http::field::expect];
  if (EqualsIgnoreCase(core::Trim(ToView(expect)), "100-continue") && req.version() >= 11) {
    auto cont =
        std::make_shared<http::response<http::empty_body>>(http::status::continue_, req.version());
    http::async_write(stream_, *cont,
                      [self = shared_from_this(), cont](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        self->ReadBody();
                      });
    return;
  }
  ReadBody();
}

void Connection::ReadBody() {
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) {
                     if (ec) return self->OnReadError(ec);
                     self->HandleRequest();
                   });
}

void Connection::OnReadError(beast::error_code ec) {
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
  if (!client_gone && ec.category() == http::make_error_code(http::error::bad_method).category()) {
    return SendProtocolError(400,
                             core::Error(core::ErrorCode::kInvalidArgument, "malformed_request",
                                         "the request is not valid HTTP/1.1: " + ec.message()));
  }
  if (ec == beast::error::timeout) {
    spdlog::debug("http: closing connection from {}: request not received in time", peer_ip_);
  }
  Close();
}

void Connection::SendProtocolError(int status, const core::Error& error) {
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

void Connection::HandleRequest() {
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
  request.peer_address = peer_ip_;
  request.remote_address = peer_ip_;
  if (peer_trusted_) {
    std::vector<std::string_view> forwarded_for;
    for (const auto& [name, value] : request.headers) {
      if (EqualsIgnoreCase(name, "X-Forwarded-For")) forwarded_for.push_back(value);
    }
    request.remote_address =
        ClientAddress(peer_ip_, forwarded_for, server_.options().trusted_proxies);
  }
  client_ip_ = request.remote_address;
  request.request_id = RequestIdFrom(request.Header("X-Request-Id"));
  request_id_ = request.request_id;
  core::ScopedRequestId log_scope(request_id_);  // every log line of this request carries it
  method_ = request.method;
  path_ = request.path;

  Response response;
  std::optional<std::map<std::string, std::string>> query =
      query_text ? ParseQuery(*query_text) : std::map<std::string, std::string>();
  const std::optional<std::string> repeated =
      query && query_text ? DuplicateQueryName(*query_text) : std::nullopt;
  if (!query) {
    route_ = server_.router().RouteNameFor(request);
    response = Problem(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                                   "the query string has a malformed percent-escape"));
  } else if (repeated) {
    route_ = server_.router().RouteNameFor(request);
    response = Problem(core::Error(core::ErrorCode::kInvalidArgument, "duplicate_query_parameter",
                                   "a query parameter occurs more than once; send it once")
                           .WithDetail("parameter", core::BoundedPrintable(*repeated, 100)));
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

void Connection::Send(Response response, bool head, unsigned version, bool keep_alive,
                      bool linger) {
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

template <class Message>
void Connection::ApplyHeaders(const Response& response, Message& msg) {
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

void Connection::StartStream(Response response, bool head, unsigned version) {
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

void Connection::Flush() {
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

void Connection::WriteStream(std::shared_ptr<std::string> data, size_t payload, bool last) {
  writing_ = true;
  ArmWriteTimer();
  asio::async_write(stream_, asio::buffer(*data),
                    [self = shared_from_this(), data, payload, last](beast::error_code ec, size_t) {
                      self->OnStreamWritten(ec, payload, last);
                    });
}

void Connection::OnStreamWritten(beast::error_code ec, size_t payload, bool last) {
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

void Connection::WatchStreamingConnection() {
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

void Connection::ArmWriteTimer() {
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

std::string Connection::PeerNote() const {
  return peer_trusted_ ? " peer=" + peer_ip_ : std::string();
}

void Connection::LogStreamEnd() {
  stream_logged_ = true;
  auto [reason, bytes] = channel_->Outcome();
  const double seconds = std::chrono::duration<double>(Clock::now() - request_started_).count();
  core::ScopedRequestId log_scope(request_id_);
  spdlog::info(
      "http method={} route={} status={} duration_ms={:.1f} remote={}{} stream_end={} bytes={}",
      method_.empty() ? "-" : method_, route_, status_, seconds * 1000, client_ip_, PeerNote(),
      reason.empty() ? "client_gone" : reason, bytes);
}

template <class Message>
void Connection::Write(std::shared_ptr<Message> msg, bool keep_alive, bool linger) {
  // Logged and counted before the write so that a client that has seen the response also sees
  // it in /metrics.
  double seconds = std::chrono::duration<double>(Clock::now() - request_started_).count();
  server_.metrics().ObserveHttpRequest(route_, method_, status_, seconds);
  core::ScopedRequestId log_scope(request_id_);  // the line starts with request_id=…
  // Host agents sync every few seconds and hold a long poll open: their successful calls are
  // logged at debug level so that they do not bury everything else.
  const auto level = route_.starts_with("/api/v1/agent/") && status_ < 400 ? spdlog::level::debug
                                                                           : spdlog::level::info;
  spdlog::log(level, "http method={} route={} status={} duration_ms={:.1f} remote={}{}",
              method_.empty() ? "-" : method_, route_, status_, seconds * 1000, client_ip_,
              PeerNote());
  state_ = State::kWriting;
  stream_.expires_after(server_.options().read_timeout);
  http::async_write(stream_, *msg,
                    [self = shared_from_this(), msg, keep_alive, linger](
                        beast::error_code ec, size_t) { self->OnWritten(ec, keep_alive, linger); });
}

void Connection::OnWritten(beast::error_code ec, bool keep_alive, bool linger) {
  if (ec) return Close();
  if (linger) return Linger();
  if (!keep_alive) return Close();
  WaitForRequest(/*first=*/false);
}

void Connection::Linger() {
  state_ = State::kLingering;
  if (server_.stopping()) return Close();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.expires_after(kLingerTime);
  buffer_.clear();
  Drain();
}

void Connection::Drain() {
  stream_.async_read_some(buffer_.prepare(kFirstReadSize),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > kLingerBytes) return self->Close();
                            self->buffer_.clear();
                            self->Drain();
                          });
}

void Connection::Close() {
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

}  // namespace gpuwerk::api::internal
