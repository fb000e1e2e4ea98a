#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/http_types.h"
#include "api/internal/server_core.h"
#include "api/internal/stream_channel.h"
#include "core/error.h"

namespace gpuwerk::api::internal {

namespace beast = boost::beast;
namespace http = boost::beast::http;

/// One TCP connection: reads requests one after another, runs them through the Router, writes
/// the responses. All its handlers run on its own strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  /// `source`: the key ServerCore::Admit counted it under, given back when it is destroyed.
  Connection(ServerCore& server, tcp::socket socket, std::string source);
  ~Connection();

  void Start();

  /// Posted by Stop(): closes the connection if it is between requests.
  void OnServerStopping();

  /// Posted by the StreamChannel when it has something for this connection.
  void PostFlush();

 private:
  using Clock = std::chrono::steady_clock;

  enum class State { kIdle, kReading, kHandling, kWriting, kLingering, kStreaming, kClosed };

  void WaitForRequest(bool first);

  void OnFirstBytes(bool first, beast::error_code ec, size_t n);

  void ReadHeader();

  void OnHeader(beast::error_code ec);

  void ReadBody();

  void OnReadError(beast::error_code ec);

  /// Answers a request that could not be read whole, then closes the connection.
  void SendProtocolError(int status, const core::Error& error);

  void HandleRequest();

  /// Converts `response` to Beast, adds the default headers and writes it.
  void Send(Response response, bool head, unsigned version, bool keep_alive, bool linger);

  /// Copies the handler's headers onto `msg` (dropping unsafe ones and those the server sets
  /// itself) and adds `Server`, `X-Content-Type-Options` and `X-Request-Id`.
  template <class Message>
  void ApplyHeaders(const Response& response, Message& msg);

  // ---- streamed responses (Response::stream) ----

  /// Sends the header of a streamed response and hands the producer its stream.
  void StartStream(Response response, bool head, unsigned version);

  /// Sends what the producer queued, or the end of the stream.
  void Flush();

  void WriteStream(std::shared_ptr<std::string> data, size_t payload, bool last);

  void OnStreamWritten(beast::error_code ec, size_t payload, bool last);

  /// Reads (and ignores) what the client sends while its stream is open, to notice when it
  /// goes away.
  void WatchStreamingConnection();

  /// A write that the client does not take within read_timeout ends the stream.
  void ArmWriteTimer();

  /// " peer=<TCP peer>" when the peer is a trusted proxy, else "": for the access log.
  std::string PeerNote() const;

  /// The access-log line of a stream, when it ends.
  void LogStreamEnd();

  template <class Message>
  void Write(std::shared_ptr<Message> msg, bool keep_alive, bool linger);

  void OnWritten(beast::error_code ec, bool keep_alive, bool linger);

  /// Half-closes, then reads and discards what the client still sends (e.g. the rest of an
  /// oversized body) for a short while, so it gets to read our answer.
  void Linger();

  void Drain();

  void Close();

  const std::string source_;
  ServerCore& server_;
  beast::tcp_stream stream_;
  asio::steady_timer write_timer_;  // a streamed response's write deadline
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kIdle;
  std::string peer_ip_ = "-";    // the TCP peer
  bool peer_trusted_ = false;    // the peer is a trusted proxy (Options::trusted_proxies)
  std::string client_ip_ = "-";  // the current request's Request::remote_address
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

}  // namespace gpuwerk::api::internal
