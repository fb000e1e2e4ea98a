#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/client_address.h"
#include "api/metrics.h"
#include "api/router.h"
#include "core/error.h"

namespace gpuwerk::api {

/// The HTTP/1.1 server (RFC 9112) in front of a Router: Boost.Beast underneath, kept out of this
/// header. Keep-alive, pipelining, `Expect: 100-continue`, HEAD (the GET handler's response
/// without its body) and `Connection: close` work as RFC 9110/9112 say.
///
/// Per request: a request id (a client's `X-Request-Id` when it is 1–64 chars of
/// [A-Za-z0-9._-], else 16 random hex chars) set on Request and echoed as `X-Request-Id`; one
/// access-log line `http request_id=… method=… route=… status=… duration_ms=… remote=…` (the
/// client address, Request::remote_address; ` peer=…` follows when a trusted proxy forwarded the
/// request; never the query string or bodies); one observation in Metrics. Every response carries
/// `Server: gpuwerk`, `X-Content-Type-Options: nosniff`, and for paths under /api
/// `Cache-Control: no-store` unless the handler set its own.
///
/// Protocol errors are answered with problem JSON and the connection closed: a body over
/// `body_limit` 413 ("payload_too_large", the handler never runs), a header over `header_limit`
/// 431 ("header_too_large"), an unparseable request 400 ("malformed_request"), a malformed query
/// string 400 ("invalid_query"), a missing (HTTP/1.1), repeated or malformed `Host` 400
/// ("invalid_host"; ParseHostAndPort, RFC 9112 §3.2), two `Origin` or two `Referer` fields 400
/// ("invalid_origin"); none of these reaches a handler. A client that does not deliver a whole
/// request within `read_timeout`, or stays silent on a kept-alive connection for `idle_timeout`, is
/// disconnected without an answer.
///
/// Streamed responses (Response::stream, e.g. server-sent events): the header goes out at once
/// (chunked, `Connection: close`), then the chunks the producer writes, in order, from any
/// thread, until the producer ends the stream or the client disconnects (the server keeps
/// reading the connection to notice; the producer learns of it through ResponseStream::OnEnd).
/// Each stream buffers at most `stream_buffer_limit` bytes the client has not taken; beyond
/// that, or when one write stays unfinished for `read_timeout`, the stream ends and the
/// connection is closed, so a slow reader costs only its own stream. Streams are counted in
/// Metrics when their header is sent and logged once when they end: the access-log line then
/// adds `stream_end=<end|client_gone|server_stopping|overflow|write_timeout|head> bytes=<n>`
/// and `duration_ms` is the stream's whole life.
///
/// Handlers run synchronously on the server's `threads` threads, so `threads` bounds how many
/// run at once. Thread-safety: all members may be called from any thread; the server must not be
/// destroyed from one of its own handlers. The Router and Metrics must outlive the server.
class HttpServer {
 public:
  struct Options {
    /// "host:port" to listen on; host an IPv4/IPv6 literal ("[::1]:8080") or a resolvable
    /// name; port 0 picks a free port (see port()).
    std::string listen = "127.0.0.1:8080";
    /// The largest request body accepted, in bytes (after chunked decoding).
    size_t body_limit = 1024 * 1024;
    /// The largest request line + header fields accepted, in bytes.
    size_t header_limit = 16 * 1024;
    /// Time allowed to receive one whole request, counted from its first byte (from the accept
    /// for a connection's first request); also the limit for writing a response.
    std::chrono::milliseconds read_timeout = std::chrono::seconds(30);
    /// How long a kept-alive connection may wait for its next request.
    std::chrono::milliseconds idle_timeout = std::chrono::seconds(60);
    /// How long Stop() waits for requests in flight before cutting connections.
    std::chrono::milliseconds stop_grace = std::chrono::seconds(5);
    /// Per streamed response: the most bytes written by the producer but not yet taken by the
    /// client; more ends the stream (see above).
    size_t stream_buffer_limit = 1024 * 1024;
    /// Number of I/O threads, ≥ 1 (handlers run on them).
    int threads = 4;
    /// The reverse proxies whose `X-Forwarded-For` is believed. A request whose TCP peer is in
    /// it gets the client address ClientAddress() picks (the right-most hop that is not itself
    /// a trusted proxy) as Request::remote_address; every other request's `X-Forwarded-For` is
    /// ignored. Request::peer_address is always the TCP peer. Empty: nobody is trusted.
    TrustedProxies trusted_proxies;
    /// The most connections open at once from one source: an IPv4 address, or an IPv6 /64 (one
    /// subscriber's block; an attacker holds all of it). One more is answered 503 problem JSON
    /// "too_many_connections" (`Retry-After: 1`) and closed before anything is read, so one
    /// source cannot take every file descriptor and thread of the server. Connections from a
    /// trusted proxy are not counted (they carry many clients, whose addresses are known only
    /// per request: the proxy caps its clients). 0: no cap.
    size_t max_connections_per_source = 256;
    /// The most connections open at once in all, so that a flood cannot take every file
    /// descriptor (accept failing with EMFILE, and with it the store, mail and logs). One more
    /// is answered 503 problem JSON "server_busy" (`Retry-After: 1`) and closed before anything
    /// is read; a slot comes back when a connection closes. 0: automatic, from the process's
    /// open-file limit at Start (core::DefaultMaxConnections: the limit less a quarter, keeping
    /// at least 128 descriptors spare). Should accept fail all the same (descriptors taken
    /// elsewhere), the server waits and retries with a growing back-off (at most 1 s) instead of
    /// spinning, and logs once when that starts and once when accepting works again.
    size_t max_connections = 0;
  };

  /// Binds, listens and starts the I/O threads.
  /// Errors: kUnavailable, api code "listen_failed", when `options.listen` is malformed or
  /// cannot be resolved, or the address cannot be bound (in use, not local, no permission); the
  /// message names the address and the reason. kInvalidArgument "invalid_option" when a limit or
  /// the thread count is not positive.
  static core::Result<std::unique_ptr<HttpServer>> Start(Options options, Router& router,
                                                         Metrics& metrics);

  /// Stops (see Stop()) and releases everything. Must not run on one of the server's threads.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The bound TCP port (the chosen one when `listen` asked for port 0).
  uint16_t port() const;
  /// The cap on open connections in force: Options::max_connections, or its automatic value.
  size_t max_connections() const;
  /// "http://<host>:<port>" reaching this server; a wildcard bind address (0.0.0.0, ::) is given
  /// as the loopback address of its family. No trailing slash.
  std::string base_url() const;

  /// Graceful stop: stops accepting, closes idle keep-alive connections at once, ends streamed
  /// responses (what is queued is sent, then the last chunk; their producers' OnEnd callbacks
  /// run), lets requests in flight finish and answers them with `Connection: close`, waits up to
  /// `options.stop_grace` for that, then cuts what is left and joins the threads. Idempotent and
  /// safe from any thread; called from a handler it only starts the stop and returns (the
  /// destructor completes it).
  void Stop();

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Decides whether a request may read `/metrics`: nothing to admit it, else the error to answer
/// (as problem JSON). Runs on an HTTP server thread.
using MetricsAccess = std::function<core::Result<void>(Request&)>;

/// Registers the operational endpoints on `router` (both take no body: RefuseBody's 400
/// otherwise): `GET /healthz` → 200
/// `{"status":"ok"}` for anyone, and `GET /metrics` → `metrics.Render()` as
/// `text/plain; version=0.0.4; charset=utf-8` for the requests `may_read_metrics` admits
/// (app/ wires api::AdmitMetricsReader: loopback or operators). `metrics` must outlive the router.
void AddOperationalRoutes(Router& router, Metrics& metrics, MetricsAccess may_read_metrics);

}  // namespace gpuwerk::api
