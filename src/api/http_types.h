#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace gpuwerk::api {

/// Header fields in the order they were received (request) or will be sent (response). Names
/// keep their spelling; look them up with the case-insensitive helpers below. A name may occur
/// more than once (e.g. `Set-Cookie`).
using HeaderList = std::vector<std::pair<std::string, std::string>>;

/// ASCII case-insensitive equality (HTTP field names, methods in Allow, media types).
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

/// Decodes RFC 3986 percent-encoding. With `plus_as_space` (query strings,
/// application/x-www-form-urlencoded) a `+` becomes a space. nullopt when a `%` is not followed
/// by two hex digits.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_as_space);

/// Parses a query string ("a=1&b=x%20y", without the `?`) into decoded name/value pairs. A name
/// without `=` has the value "". A repeated name keeps its first value. nullopt when any part
/// has a malformed percent-escape.
std::optional<std::map<std::string, std::string>> ParseQuery(std::string_view query);

/// The first name that occurs more than once in query string `query` (decoded as ParseQuery
/// does: `month=1&month=2`, `a=1&%61=2`); nullopt when none does or a part is malformed. The
/// server answers such a request 400 `duplicate_query_parameter` rather than pick one value.
std::optional<std::string> DuplicateQueryName(std::string_view query);

/// The host and port of an authority as the `Host` field (RFC 9112 §3.2, RFC 9110 §7.2) and an
/// `Origin` (RFC 6454 §7) carry it: `uri-host [ ":" port ]`.
struct HostAndPort {
  /// Lower case; an IPv6 literal keeps its brackets ("[::1]").
  std::string host;
  /// 1 to 65535; nullopt when the text names none (the scheme's default applies).
  std::optional<int> port;
};

/// Parses "host[:port]" where host is an IPv4 literal, a bracketed IPv6 literal ("[2001:db8::1]",
/// inet_pton inside the brackets, no zone) or a DNS name (core::IsHostAddress: RFC 1123 labels,
/// at most 253 characters), and port is 1 to 5 digits with a value 1 to 65535. nullopt for
/// anything else: empty text, blanks, a list ("a, b"), userinfo ("u@h"), a path, an empty port
/// ("h:"), a reg-name with characters a DNS name cannot hold ("a_b", "%41"). Pure; thread-safe.
std::optional<HostAndPort> ParseHostAndPort(std::string_view authority);

/// One HTTP request as handlers see it: plain data, no Beast types. Built by HttpServer (or by
/// tests); handlers may read and modify it (e.g. to attach what they resolved).
struct Request {
  /// The method as sent, upper case by convention: "GET", "POST", "DELETE", …
  std::string method;
  /// The raw request-target, e.g. "/api/v1/usage/sessions?page=2". May hold secrets in the
  /// query: never log it.
  std::string target;
  /// The path part of `target`, still percent-encoded, e.g. "/api/v1/ssh-keys/key_x".
  std::string path;
  /// Query parameters, percent-decoded (`+` is a space). A repeated name keeps its first value.
  std::map<std::string, std::string> query;
  /// Header fields as received; use Header() to look one up.
  HeaderList headers;
  /// The body, complete (HttpServer reads it whole, up to its body limit).
  std::string body;
  /// The client's IP address, e.g. "127.0.0.1" or "::1": the TCP peer, or, when the peer is a
  /// trusted proxy (HttpServer::Options::trusted_proxies), the client ClientAddress() picks from
  /// `X-Forwarded-For`. No port. Every per-source rule (rate limits, lockouts) and every audit
  /// record uses this.
  std::string remote_address;
  /// The TCP peer's IP address, whatever any header says (e.g. the proxy's). No port. For rules
  /// about where the connection itself comes from (e.g. /metrics for loopback only).
  std::string peer_address;
  /// The request id: the client's `X-Request-Id` when well formed, else 16 random hex chars.
  std::string request_id;
  /// Values of the `{name}` segments of the matched route pattern, percent-decoded. Filled by
  /// Router::Dispatch.
  std::map<std::string, std::string> path_params;
  /// The name of the route that matched (for metrics and logs), "unmatched" if none. Filled by
  /// Router::Dispatch.
  std::string route;

  /// The value of the first header field named `name` (case-insensitive), "" when absent. The
  /// view points into `headers` and lives as long as it is not modified.
  std::string_view Header(std::string_view name) const;
  /// The value of cookie `name` from the `Cookie` header(s) (RFC 6265 §5.4; surrounding double
  /// quotes removed), "" when absent.
  std::string Cookie(std::string_view name) const;
  /// The path parameter `name`, "" when the route has none by that name.
  std::string PathParam(std::string_view name) const;
  /// The query parameter `name` as a decimal integer; `default_value` when absent or empty.
  /// Errors: kInvalidArgument, api code "invalid_query", when present but not an integer in
  /// int64 range (details: {"parameter": name}).
  core::Result<int64_t> QueryInt(std::string_view name, int64_t default_value) const;
};

/// The server's end of a streamed response body (Response::stream), e.g. server-sent events.
/// Whoever holds it hands the server the next bytes of the body; the server sends them in order,
/// as HTTP/1.1 chunks. Thread-safe: every member may be called from any thread, also after the
/// server is gone (they then do nothing and report the stream ended).
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  /// Queues `bytes` as the next part of the body. Returns false, queueing nothing, once the
  /// stream has ended. When the bytes queued but not yet taken by the client would exceed the
  /// server's `stream_buffer_limit` (a slow or stalled reader), the stream ends instead (and
  /// the connection is closed) and this returns false.
  virtual bool Write(std::string bytes) = 0;
  /// Ends the body once what is queued is sent; the connection is then closed. Idempotent.
  virtual void End() = 0;
  /// Whether the stream has ended: End(), the client went away, the buffer overflowed, or the
  /// server is stopping. Once true it stays true.
  virtual bool ended() const = 0;
  /// Calls `on_end` exactly once when the stream ends, for whatever reason; at once, on this
  /// thread, when it already has. It runs on the thread that noticed the end (an I/O thread, or
  /// a thread calling Write or End) with no lock of the stream held; it must be quick and may
  /// call Write (which then returns false) and End. Several callbacks may be registered.
  virtual void OnEnd(std::function<void()> on_end) = 0;
};

/// One HTTP response as handlers produce it. HttpServer adds Content-Length, `Server`,
/// `X-Content-Type-Options`, `X-Request-Id` and, for /api paths, `Cache-Control: no-store`
/// unless the handler set one.
struct Response {
  int status = 200;
  HeaderList headers;
  std::string body;
  /// Set by a handler that answers later (a long poll): right after the handler returns, the
  /// server calls `deferred` once with a `respond` function, and sends whatever `respond` is
  /// given instead of this response (whose status, headers and body are then ignored). `respond`
  /// may be called from any thread and must be called exactly once, promptly when the server
  /// stops; the connection waits for it (no other request of that connection runs meanwhile).
  std::function<void(std::function<void(Response)> respond)> deferred;
  /// Set by a handler that answers with a body of unknown length produced over time (server-sent
  /// events): the server sends `status` and `headers` at once, with no Content-Length, as
  /// `Transfer-Encoding: chunked` (close-delimited to an HTTP/1.0 client) and `Connection:
  /// close`, adding `Content-Type: text/event-stream` unless the handler set a content type and
  /// `Cache-Control: no-store` unless it set one; `body` is ignored. Then it calls `stream` once,
  /// on an I/O thread, with the stream to write the body to; the connection is the stream's until
  /// it ends (the server reads no further request from it) and is closed after. For HEAD the
  /// stream has already ended when `stream` is called. A status outside 2xx ignores `stream`.
  std::function<void(std::shared_ptr<ResponseStream>)> stream;

  /// `status` with `value` serialised as JSON (`Content-Type: application/json`). Invalid
  /// UTF-8 in strings is replaced by U+FFFD rather than throwing.
  static Response Json(int status, const nlohmann::json& value);
  /// `status` with `json_text`, JSON already serialised (e.g. by JsonWriter), as the body
  /// (`Content-Type: application/json`).
  static Response JsonText(int status, std::string json_text);
  /// `status` with a plain-text body (`text/plain; charset=utf-8` unless given).
  static Response Text(int status, std::string body,
                       std::string content_type = "text/plain; charset=utf-8");
  /// `status` with an HTML body (`text/html; charset=utf-8`).
  static Response Html(int status, std::string body);
  /// 204 No Content, no body.
  static Response NoContent();
  /// A redirect to `location` (an absolute path or URL); 303 See Other by default, so that the
  /// browser follows with a GET whatever the method was.
  static Response Redirect(std::string location, int status = 303);

  /// The value of the first header named `name` (case-insensitive), "" when absent.
  std::string_view Header(std::string_view name) const;
  /// Replaces every header named `name` (case-insensitive) by one with `value`.
  Response& SetHeader(std::string name, std::string value);
  /// Appends a header, keeping others of the same name (e.g. several `Set-Cookie`).
  Response& AddHeader(std::string name, std::string value);
};

/// The HTTP status for an error kind. The one place that maps codes to statuses:
/// invalid_argument 400, not_found 404, already_exists 409, failed_precondition 409,
/// payment_required 402, unauthenticated 401, permission_denied 403, resource_exhausted 429,
/// payload_too_large 413, unavailable 503, deadline_exceeded 504, internal 500.
int HttpStatusFor(core::ErrorCode code);

/// The standard reason phrase of an HTTP status ("Not Found"), "Unknown" for ones we don't use.
std::string_view ReasonPhrase(int status);

/// RFC 9457 problem details for `error`, `Content-Type: application/problem+json`, with status
/// HttpStatusFor(error.code). Fields: `type` ("about:blank"), `title` (the reason phrase),
/// `status`, `detail` (error.message), `code` (error.api_code), then every key of
/// error.details that does not collide with those.
Response Problem(const core::Error& error);
/// As above with an explicit status, for the few statuses no ErrorCode maps to (405, 431).
Response Problem(int status, const core::Error& error);

/// For routes that take no request body (every GET, HEAD and DELETE, and POSTs that only act):
/// nothing when the body is empty or the empty JSON object `{}` (clients that send `{}` with every
/// POST ask for nothing), else the error to answer, so that a body meant for another route never
/// passes unread. Never throws.
/// Errors: kInvalidArgument "invalid_field": a JSON object with members (details {"field": the
/// first}), or any other body ("this route takes no request body").
core::Result<void> RefuseBody(const Request& request);

/// The request body as a JSON object whose members are all named in `fields` (R-19: unknown and
/// duplicate JSON fields are refused). The Content-Type must be application/json (parameters such
/// as charset allowed) or absent. Never throws.
/// Errors: kInvalidArgument, api code "invalid_json", when the content type is another, the
/// body is empty, not JSON, or JSON but not an object; api code "invalid_field" (details
/// {"field": name}) for a key that occurs twice in one object at any depth (the parser would keep
/// the last) and for a top-level member not in `fields`.
core::Result<nlohmann::json> ParseJsonObject(const Request& request,
                                             std::initializer_list<std::string_view> fields);
/// ParseJsonObject for bodies whose members a protocol type reads (the agent and relay routes):
/// duplicate keys are refused as above; which members exist is left to the caller, which must
/// refuse the ones it does not know (protocol's request FromJson functions do).
core::Result<nlohmann::json> ParseJsonBody(const Request& request);
/// Refuses a member of `object` whose name is not in `fields`: kInvalidArgument "invalid_field",
/// details {"field": path + name}. For nested objects of a body (`path` e.g. "hosts[0].").
core::Result<void> RefuseUnknownFields(const nlohmann::json& object,
                                       std::initializer_list<std::string_view> fields,
                                       std::string_view path = "");

/// Typed field getters for a parsed JSON object. All fail with kInvalidArgument, api code
/// "invalid_field", a message naming the field and details {"field": field}.
///
/// A string of `min_len`..`max_len` characters (Unicode code points). Missing, null or not a
/// string is an error.
core::Result<std::string> RequireString(const nlohmann::json& object, std::string_view field,
                                        size_t max_len, size_t min_len = 1);
/// Like RequireString, but a missing or null field gives nullopt.
core::Result<std::optional<std::string>> OptionalString(const nlohmann::json& object,
                                                        std::string_view field, size_t max_len,
                                                        size_t min_len = 0);
/// An integer (JSON number without fraction) in [min, max].
core::Result<int64_t> RequireInt(const nlohmann::json& object, std::string_view field, int64_t min,
                                 int64_t max);
/// A boolean.
core::Result<bool> RequireBool(const nlohmann::json& object, std::string_view field);

}  // namespace gpuwerk::api
