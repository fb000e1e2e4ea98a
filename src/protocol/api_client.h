#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace gpuwerk::protocol {

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

/// The ErrorCode for an HTTP error status and the problem's API code, the inverse of the
/// server's mapping (api/http_types): 400 invalid argument, 401 unauthenticated, 402 payment
/// required, 403 permission denied, 404 not found, 409 already exists for the API codes the
/// server answers for an existing thing (kAlreadyExistsCodes) and failed precondition for the
/// others, 413 payload too large, 429 resource exhausted, 503 unavailable, 504 deadline exceeded,
/// other 4xx invalid argument, anything else internal.
core::ErrorCode ErrorCodeForStatus(int status, std::string_view api_code = {});

/// The API codes of 409 answers that mean "it exists already" (ErrorCode::kAlreadyExists on the
/// server): name_taken, email_taken, key_exists, key_taken, already_exists, already_queued,
/// already_paired.
/// Every other 409 code is a failed precondition (key_in_use, no_capacity, …).
bool IsAlreadyExistsCode(std::string_view api_code);

/// Turns an error answer into a core::Error. For a problem JSON body (protocol::Problem) the API
/// code is its `code`, the message its `detail` (or `title` when that is empty), and its extension
/// members land in `details`; the ErrorCode comes from ErrorCodeForStatus. For anything else
/// (a proxy's HTML page, JSON that is not a problem) the code is "http_<status>" and the message
/// names the status.
core::Error ErrorFromResponse(const ApiResponse& response);

/// Percent-encodes `segment` for use as one path segment (RFC 3986 §2.1: everything but the
/// unreserved characters), e.g. an id taken from the command line.
std::string PathEscape(std::string_view segment);

/// Checks that `url` may carry a host's or a relay's credential: an `https://` URL, or an
/// `http://` URL whose host is loopback (`localhost`, 127.0.0.0/8, `::1`), where the token never
/// crosses a network. Parsed with libcurl's URL API (RFC 3986).
/// Errors: kInvalidArgument "invalid_server_url" (not an http or https URL with a host; a user
/// name or password in it) or "insecure_server_url" (`http://` to any other host: put the
/// server behind TLS).
core::Result<void> CheckCredentialUrl(std::string_view url);

/// The one synchronous client of the gpuwerk REST API (/api/v1) over libcurl, used by the CLI
/// (API tokens), the agent (host tokens: agent::AgentClient) and the relay (its relay credential:
/// relay::HttpRelayAuthorizer, relay::HttpRelaySessionLog). Authenticates with
/// `Authorization: Bearer <token>` when a token is set, and/or sends a sign-in session cookie
/// (used only by `gpuwerk login`). Every request has a 30 s timeout unless set otherwise, follows
/// no redirects and honours the usual proxy environment variables. The setters are not
/// thread-safe; once configured, the const calls may run on several threads at once (each call
/// opens its own connection).
class ApiClient {
 public:
  /// `base_url` is the server's root, e.g. "http://127.0.0.1:8080" (a trailing "/" is dropped);
  /// `token` is an API token ("gwt_…"), or "" for none.
  ApiClient(std::string base_url, std::string token);

  /// A client for a gpuwerk process rather than a person (the agent, the relay): `user_agent`
  /// (e.g. "gpuwerk-agent"), `timeout` per request, and no CLI hint in "server_unreachable".
  static ApiClient ForService(std::string base_url, std::string token, std::string user_agent,
                              std::chrono::milliseconds timeout);

  /// Sends `Cookie: <cookie>` with every later request, e.g. "gpuwerk_session=abc"; "" for none.
  void SetCookie(std::string cookie) { cookie_ = std::move(cookie); }

  /// Sets the per-request timeout (connect + transfer). The default is 30 s.
  void SetTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  /// The User-Agent header, e.g. "gpuwerk-agent". The default is "gpuwerk-cli".
  void SetUserAgent(std::string user_agent) { user_agent_ = std::move(user_agent); }

  /// The sentence appended to a "server_unreachable" message (how to fix it). The default is the
  /// CLI's: "Is it running? Set GPUWERK_URL or run 'gpuwerk login --url URL'"; "" for none.
  void SetUnreachableHint(std::string hint) { unreachable_hint_ = std::move(hint); }

  /// While `*cancelled` is true, every transfer in progress ends within about a second and new
  /// ones end at once, with kUnavailable "server_unreachable" (e.g. an agent that stops ends its
  /// long poll). `cancelled` must outlive the client; nullptr (the default) for none.
  void SetCancelFlag(const std::atomic<bool>* cancelled) { cancelled_ = cancelled; }

  /// Makes this client's calls (and its copies') take their connection from one shared cache
  /// (libcurl's share interface, CURL_LOCK_DATA_CONNECT), so that requests one after the other
  /// reuse one kept-alive connection instead of opening one each (the relay's re-checks). Calls
  /// stay thread-safe; concurrent calls still open their own connection.
  void ShareConnections();

  /// The base URL, without a trailing "/".
  const std::string& base_url() const { return base_url_; }

  /// Sends `method` to base_url + `path` (which starts with "/", query string allowed) with
  /// `body` as JSON when given, plus `headers` (each "Name: value"). Answers any HTTP status as
  /// an ApiResponse. `timeout`, when given, replaces the client's for this call (a long poll).
  /// Errors: kUnavailable "server_unreachable" when the server cannot be reached
  /// (refused, DNS, TLS, reset, a timeout before connecting), kDeadlineExceeded "server_timeout"
  /// when it accepted the connection but did not answer in time, kPayloadTooLarge
  /// "response_too_large" above 32 MiB. Their `details` carry {"reason": libcurl's reason}.
  core::Result<ApiResponse> Call(
      std::string_view method, std::string_view path, const nlohmann::json* body = nullptr,
      const std::vector<std::string>& headers = {},
      std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;

  /// Call(), then ErrorFromResponse() for any non-2xx answer; the JSON body otherwise (null for
  /// 204). Errors: those of Call() and the server's.
  core::Result<nlohmann::json> CallOk(std::string_view method, std::string_view path,
                                      const nlohmann::json* body = nullptr) const;

  /// GETs a paged list (protocol::Page) page by page from page 1 and returns all the items as one
  /// JSON array. `path` may already have a query string. Errors: those of CallOk(), kInternal
  /// "unexpected_response" when an answer is not a page.
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
  std::string user_agent_ = "gpuwerk-cli";
  std::string unreachable_hint_ = "Is it running? Set GPUWERK_URL or run 'gpuwerk login --url URL'";
  const std::atomic<bool>* cancelled_ = nullptr;
  struct SharedConnections;
  std::shared_ptr<SharedConnections> shared_;  ///< set by ShareConnections
  std::chrono::milliseconds timeout_{std::chrono::seconds(30)};
};

}  // namespace gpuwerk::protocol
