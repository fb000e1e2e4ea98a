#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace gpuwerk::cli {

/// One HTTP answer from the gpuwerk API, whatever its status.
struct ApiResponse {
  int status = 0;  ///< the HTTP status code, e.g. 200
  /// The body parsed as JSON; null when the body is empty or is not JSON (see `text`).
  nlohmann::json body;
  /// The values of every `Set-Cookie` header, in order, e.g. "gpuwerk_session=…; Path=/; …".
  std::vector<std::string> set_cookies;
  /// The raw body, kept for answers that are not JSON (a proxy's HTML error page, say).
  std::string text;

  /// True for 2xx statuses.
  bool ok() const { return status >= 200 && status < 300; }
};

/// The ErrorCode for an HTTP error status, the inverse of the server's mapping (api/http_types):
/// 400 invalid argument, 401 unauthenticated, 402 payment required, 403 permission denied,
/// 404 not found, 409 already exists (when `api_code` says so: "…_taken", "…_exists",
/// "already_…") or failed precondition, 413 payload too large, 429 resource exhausted,
/// 503 unavailable, 504 deadline exceeded, other 4xx invalid argument, anything else internal.
core::ErrorCode ErrorCodeForStatus(int status, std::string_view api_code = {});

/// Turns an error answer into a core::Error. For an RFC 9457 problem JSON body the API code comes
/// from "code", the message from "detail" (or "title"), and the other members (except "type",
/// "title", "status") land in `details`. For anything else the code is "http_<status>" and the
/// message names the status.
core::Error ErrorFromResponse(const ApiResponse& response);

/// Percent-encodes `segment` for use as one path segment (RFC 3986 §2.1: everything but the
/// unreserved characters), e.g. an id taken from the command line.
std::string PathEscape(std::string_view segment);

/// A synchronous client of the gpuwerk REST API (/api/v1) over libcurl. Authenticates with
/// `Authorization: Bearer <token>` when a token is set, and/or sends a sign-in session cookie
/// (used only by `gpuwerk login`). Every request has a 30 s timeout, follows no redirects and
/// honours the usual proxy environment variables. Not thread-safe (one per thread); cheap to
/// construct: each call opens its own connection.
class ApiClient {
 public:
  /// `base_url` is the server's root, e.g. "http://127.0.0.1:8080" (a trailing "/" is dropped);
  /// `token` is an API token ("gwt_…"), or "" for none.
  ApiClient(std::string base_url, std::string token);

  /// Sends `Cookie: <cookie>` with every later request, e.g. "gpuwerk_session=abc"; "" for none.
  void SetCookie(std::string cookie) { cookie_ = std::move(cookie); }

  /// Sets the per-request timeout (connect + transfer). The default is 30 s.
  void SetTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  /// The base URL, without a trailing "/".
  const std::string& base_url() const { return base_url_; }

  /// Sends `method` to base_url + `path` (which starts with "/", query string allowed) with
  /// `body` as JSON when given, plus `headers` (each "Name: value"). Answers any HTTP status as
  /// an ApiResponse. Errors: kUnavailable "server_unreachable" when the server cannot be reached
  /// (refused, DNS, TLS, reset, a timeout before connecting), kDeadlineExceeded "server_timeout"
  /// when it accepted the connection but did not answer in time, kPayloadTooLarge
  /// "response_too_large" above 32 MiB.
  core::Result<ApiResponse> Call(std::string_view method, std::string_view path,
                                 const nlohmann::json* body = nullptr,
                                 const std::vector<std::string>& headers = {}) const;

  /// Call(), then ErrorFromResponse() for any non-2xx answer; the JSON body otherwise (null for
  /// 204). Errors: those of Call() and the server's.
  core::Result<nlohmann::json> CallOk(std::string_view method, std::string_view path,
                                      const nlohmann::json* body = nullptr) const;

  /// GETs a paged list (`{"items": [...], "page": N, "pages": M, "total": T}`) page by page from
  /// page 1 and returns all the items as one JSON array. `path` may already have a query string.
  /// Errors: those of CallOk(), kInternal "unexpected_response" when an answer is not a page.
  core::Result<nlohmann::json> GetAllPages(std::string_view path) const;

  /// Receives a streamed body piece by piece; returns false to stop the transfer.
  using StreamSink = std::function<bool(std::string_view bytes)>;

  /// GETs `path` (plus `headers`) and hands a 2xx answer's body to `sink` as it arrives (e.g.
  /// server-sent events), with no overall timeout, until the server ends it, `sink` returns
  /// false, or nothing at all arrives for `idle_timeout` (a stream with heartbeats never goes
  /// quiet that long). The answer's status comes back; a non-2xx answer's body is not given to
  /// `sink` but parsed into the ApiResponse as Call() does. `stopped` says whether `sink` ended
  /// it. Errors: as Call() before the answer starts ("server_unreachable"); after it started, a
  /// broken or idle connection is kUnavailable "stream_interrupted".
  struct StreamEnd {
    ApiResponse response;  ///< status, Set-Cookie and, for an error answer, its body
    bool stopped = false;  ///< `sink` returned false
  };
  core::Result<StreamEnd> Stream(std::string_view path, const std::vector<std::string>& headers,
                                 const StreamSink& sink,
                                 std::chrono::milliseconds idle_timeout) const;

 private:
  std::string base_url_;
  std::string token_;
  std::string cookie_;
  std::chrono::milliseconds timeout_{std::chrono::seconds(30)};
};

/// One server-sent event (WHATWG HTML Standard, "Server-sent events", §9.2.6 "Interpreting an
/// event stream").
struct ServerSentEvent {
  std::string type = "message";  ///< the `event:` field, "message" when none
  std::string data;              ///< the `data:` lines joined with "\n"
  std::string id;                ///< the last event ID at dispatch ("" when none so far)
};

/// Parses a text/event-stream incrementally, as the WHATWG algorithm does: lines end in CRLF, LF
/// or CR; `:` starts a comment; a blank line dispatches the event (none when no data came);
/// `retry:` with only digits sets the reconnection time; an `id:` holding NUL is ignored; a
/// leading U+FEFF is skipped. Not thread-safe.
class SseParser {
 public:
  /// Feeds the next bytes; returns the events they complete, in order.
  std::vector<ServerSentEvent> Feed(std::string_view bytes);
  /// The last `retry:` in milliseconds, or -1 when none came.
  int64_t retry_ms() const { return retry_ms_; }
  /// Comment lines seen so far (the server's `: keep-alive` heartbeats).
  int64_t comments() const { return comments_; }

 private:
  void Line(std::string_view line, std::vector<ServerSentEvent>& out);

  std::string buffer_;
  bool started_ = false;  // past a possible byte order mark
  std::string data_;
  std::string type_;
  std::string last_id_;
  int64_t retry_ms_ = -1;
  int64_t comments_ = 0;
};

}  // namespace gpuwerk::cli
