#include "protocol/api_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include "core/curl_handles.h"
#include "core/strings.h"
#include "protocol/page.h"
#include "protocol/problem.h"

namespace gpuwerk::protocol {
namespace {

using core::ErrorCode;

/// Answers larger than this are refused (the API's pages are a few KiB).
constexpr size_t kMaxResponseBytes = 32 * 1024 * 1024;

/// What the write and header callbacks fill in.
struct Transfer {
  std::string body;
  std::vector<std::string> set_cookies;
  bool too_large = false;
  const std::atomic<bool>* cancelled = nullptr;  // ApiClient::SetCancelFlag
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->body.size() + n > kMaxResponseBytes) {
    t->too_large = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  t->body.append(data, n);
  return n;
}

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  if (line.starts_with("HTTP/")) {
    t->set_cookies.clear();  // a new response (after a 1xx): forget the previous one's headers
  } else if (StartsWithIgnoreCase(line, "set-cookie:")) {
    t->set_cookies.emplace_back(
        core::Trim(line.substr(sizeof("set-cookie:") - 1), core::kWhitespace));
  }
  return n;
}

/// What the callbacks of a streamed GET (ApiClient::Stream) share.
struct StreamTransfer {
  CURL* curl = nullptr;
  const ApiClient::StreamSink* sink = nullptr;
  std::chrono::milliseconds idle{0};
  std::chrono::steady_clock::time_point last_byte = std::chrono::steady_clock::now();
  Transfer error_answer;   // a non-2xx answer: its body and cookies, as Call() keeps them
  bool streaming = false;  // a 2xx body has started
  bool stopped = false;    // the sink said stop
  bool idle_expired = false;
};

long ResponseCode(CURL* curl) {
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

size_t OnStreamBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<StreamTransfer*>(user);
  const size_t n = size * count;
  t->last_byte = std::chrono::steady_clock::now();
  const long status = ResponseCode(t->curl);
  if (status < 200 || status > 299) return OnBody(data, size, count, &t->error_answer);
  t->streaming = true;
  if (!(*t->sink)(std::string_view(data, n))) {
    t->stopped = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  return n;
}

size_t OnStreamHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<StreamTransfer*>(user);
  t->last_byte = std::chrono::steady_clock::now();
  return OnHeader(data, size, count, &t->error_answer);
}

bool Cancelled(const std::atomic<bool>* cancelled) {
  return cancelled != nullptr && cancelled->load();
}

/// Called about once a second while a transfer runs: aborts it once cancelled.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return Cancelled(static_cast<Transfer*>(user)->cancelled) ? 1 : 0;
}

/// Called about once a second while the transfer runs: ends a stream that went quiet.
int OnStreamProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<StreamTransfer*>(user);
  if (Cancelled(t->error_answer.cancelled)) return 1;
  if (std::chrono::steady_clock::now() - t->last_byte > t->idle) {
    t->idle_expired = true;
    return 1;  // abort
  }
  return 0;
}

std::string WithPage(std::string_view path, int page) {
  std::string out(path);
  out += path.find('?') == std::string_view::npos ? "?page=" : "&page=";
  out += std::to_string(page);
  return out;
}

}  // namespace

ErrorCode ErrorCodeForStatus(int status, std::string_view api_code) {
  switch (status) {
    case 400:
      return ErrorCode::kInvalidArgument;
    case 401:
      return ErrorCode::kUnauthenticated;
    case 402:
      return ErrorCode::kPaymentRequired;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
      return IsAlreadyExistsCode(api_code) ? ErrorCode::kAlreadyExists
                                           : ErrorCode::kFailedPrecondition;
    case 413:
      return ErrorCode::kPayloadTooLarge;
    case 429:
      return ErrorCode::kResourceExhausted;
    case 503:
      return ErrorCode::kUnavailable;
    case 504:
      return ErrorCode::kDeadlineExceeded;
    default:
      break;
  }
  if (status >= 400 && status < 500) return ErrorCode::kInvalidArgument;
  return ErrorCode::kInternal;
}

bool IsAlreadyExistsCode(std::string_view api_code) {
  static constexpr std::string_view kCodes[] = {"name_taken",    "email_taken",    "key_exists",
                                                "key_taken",     "already_exists", "already_queued",
                                                "already_paired"};
  return std::find(std::begin(kCodes), std::end(kCodes), api_code) != std::end(kCodes);
}

core::Result<void> CheckCredentialUrl(std::string_view url) {
  auto invalid = [&](const std::string& why) -> core::Result<void> {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_server_url",
                      "the server URL '" + core::BoundedPrintable(url) + "' " + why);
  };
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> parsed(curl_url(), &curl_url_cleanup);
  if (parsed == nullptr) return invalid("could not be parsed (out of memory)");
  if (curl_url_set(parsed.get(), CURLUPART_URL, std::string(url).c_str(), 0) != CURLUE_OK) {
    return invalid("is not a URL; it must look like https://gpuwerk.example.com");
  }
  auto part = [&](CURLUPart which) -> std::string {
    char* text = nullptr;
    if (curl_url_get(parsed.get(), which, &text, 0) != CURLUE_OK || text == nullptr) return "";
    std::string out(text);
    curl_free(text);
    return out;
  };
  auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  const std::string scheme = lower(part(CURLUPART_SCHEME));
  std::string host = lower(part(CURLUPART_HOST));
  if (scheme != "http" && scheme != "https") return invalid("must start with https://");
  if (host.empty()) return invalid("has no host");
  if (!part(CURLUPART_USER).empty() || !part(CURLUPART_PASSWORD).empty()) {
    return invalid("must not hold a user name or password; the token goes in its own option");
  }
  if (scheme == "https") return {};
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  in_addr v4{};
  in6_addr v6{};
  const bool loopback =
      host == "localhost" ||
      (::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) ||
      (::inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6));
  if (loopback) return {};
  return core::Fail(ErrorCode::kInvalidArgument, "insecure_server_url",
                    "the server URL '" + core::BoundedPrintable(url) +
                        "' is http:// to a host that is not this machine: the token would cross "
                        "the network in clear text; use https:// (the server behind a TLS proxy, "
                        "docs/configuration.md)");
}

core::Error ErrorFromResponse(const ApiResponse& response) {
  const int status = response.status;
  if (auto problem = ProblemFromJson(response.body); problem && !problem->code.empty()) {
    std::string message = problem->detail.empty() ? problem->title : problem->detail;
    if (message.empty()) {
      message = "the server answered HTTP " + std::to_string(status) + " without an explanation";
    }
    core::Error error(ErrorCodeForStatus(status, problem->code), problem->code, std::move(message));
    error.details = std::move(problem->extensions);
    return error;
  }
  std::string api_code = "http_" + std::to_string(status);
  std::string message =
      "the server answered HTTP " + std::to_string(status) +
      (response.body.is_null() ? " with a body that is not JSON" : " without an explanation");
  return core::Error(ErrorCodeForStatus(status, api_code), std::move(api_code), std::move(message));
}

std::string PathEscape(std::string_view segment) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(segment.size());
  for (unsigned char c : segment) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

ApiClient::ApiClient(std::string base_url, std::string token)
    : base_url_(std::move(base_url)), token_(std::move(token)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

namespace {

curl_slist* HeaderList(const std::string& token, const std::vector<std::string>& headers) {
  curl_slist* list = nullptr;
  auto add_header = [&list](const std::string& h) {
    if (curl_slist* next = curl_slist_append(list, h.c_str())) list = next;
  };
  if (!token.empty()) add_header("Authorization: Bearer " + token);
  for (const auto& h : headers) add_header(h);
  return list;
}

void SetCommonOptions(CURL* c, const std::string& url, char* error_buffer, curl_slist* headers,
                      std::chrono::milliseconds connect_timeout, const std::string& user_agent,
                      const std::string& cookie) {
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_USERAGENT, user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  if (!cookie.empty()) curl_easy_setopt(c, CURLOPT_COOKIE, cookie.c_str());
}

core::Error Unreachable(const std::string& base_url, const std::string& hint, std::string reason) {
  while (!reason.empty() && (reason.back() == '\n' || reason.back() == '.')) reason.pop_back();
  std::string message = "cannot reach the gpuwerk server at " + base_url + ": " + reason;
  if (!hint.empty()) message += ". " + hint;
  return core::Error(ErrorCode::kUnavailable, "server_unreachable", std::move(message))
      .WithDetail("reason", reason);
}

core::Error TooLarge(const std::string& base_url) {
  return core::Error(ErrorCode::kPayloadTooLarge, "response_too_large",
                     "the answer from the gpuwerk server at " + base_url +
                         " is larger than the client accepts (32 MiB)");
}

}  // namespace

/// A libcurl share handle holding one connection cache, with the locks libcurl asks for.
struct ApiClient::SharedConnections {
  CURLSH* handle = nullptr;
  std::mutex mu[CURL_LOCK_DATA_LAST];

  SharedConnections() {
    handle = curl_share_init();
    if (handle == nullptr) return;
    curl_share_setopt(handle, CURLSHOPT_LOCKFUNC, &Lock);
    curl_share_setopt(handle, CURLSHOPT_UNLOCKFUNC, &Unlock);
    curl_share_setopt(handle, CURLSHOPT_USERDATA, this);
    curl_share_setopt(handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(handle, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  }
  ~SharedConnections() {
    if (handle != nullptr) curl_share_cleanup(handle);
  }
  SharedConnections(const SharedConnections&) = delete;
  SharedConnections& operator=(const SharedConnections&) = delete;

  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* self) {
    static_cast<SharedConnections*>(self)->mu[data].lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* self) {
    static_cast<SharedConnections*>(self)->mu[data].unlock();
  }
};

void ApiClient::ShareConnections() {
  core::CurlGlobalInitOnce();
  if (!shared_) shared_ = std::make_shared<SharedConnections>();
}

ApiClient ApiClient::ForService(std::string base_url, std::string token, std::string user_agent,
                                std::chrono::milliseconds timeout) {
  ApiClient client(std::move(base_url), std::move(token));
  client.SetUserAgent(std::move(user_agent));
  client.SetUnreachableHint("");
  client.SetTimeout(timeout);
  return client;
}

core::Result<ApiResponse> ApiClient::Call(std::string_view method, std::string_view path,
                                          const nlohmann::json* body,
                                          const std::vector<std::string>& headers,
                                          std::optional<std::chrono::milliseconds> timeout) const {
  core::CurlGlobalInitOnce();
  core::CurlEasy curl(curl_easy_init());
  if (!curl) return core::Internal("could not start an HTTP request (curl_easy_init failed)");
  CURL* c = curl.get();
  const std::chrono::milliseconds limit = timeout.value_or(timeout_);

  const std::string url = base_url_ + std::string(path);
  const std::string method_str(method);
  std::string payload;
  Transfer transfer;
  transfer.cancelled = cancelled_;
  char error_buffer[CURL_ERROR_SIZE] = {};

  std::vector<std::string> all_headers = {
      "Accept: application/json, application/problem+json",
      "Expect:",  // no "Expect: 100-continue" round trip for larger bodies
      // Without a body: drop the form content type curl adds to a bare POST.
      body != nullptr ? "Content-Type: application/json" : "Content-Type:"};
  all_headers.insert(all_headers.end(), headers.begin(), headers.end());
  core::CurlList header_list(HeaderList(token_, all_headers));

  SetCommonOptions(c, url, error_buffer, header_list.get(), limit, user_agent_, cookie_);
  if (shared_ && shared_->handle != nullptr) curl_easy_setopt(c, CURLOPT_SHARE, shared_->handle);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(limit.count()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &OnProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &transfer);

  if (body != nullptr || method_str == "POST" || method_str == "PUT" || method_str == "PATCH") {
    if (body != nullptr) payload = body->dump();
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.c_str());
    if (method_str != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method_str.c_str());
  } else if (method_str == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else if (method_str == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method_str.c_str());
  }

  const CURLcode rc = Cancelled(cancelled_) ? CURLE_ABORTED_BY_CALLBACK : curl_easy_perform(c);
  if (rc != CURLE_OK) {
    if (transfer.too_large) return core::Fail(TooLarge(base_url_));
    std::string reason = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);
    curl_off_t connect_us = 0;
    curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
    if (rc == CURLE_OPERATION_TIMEDOUT && connect_us > 0) {
      while (!reason.empty() && (reason.back() == '\n' || reason.back() == '.')) reason.pop_back();
      return core::Fail(
          core::Error(ErrorCode::kDeadlineExceeded, "server_timeout",
                      "the gpuwerk server at " + base_url_ + " did not answer in time: " + reason)
              .WithDetail("reason", reason));
    }
    return core::Fail(Unreachable(base_url_, unreachable_hint_, std::move(reason)));
  }

  ApiResponse response;
  response.status = static_cast<int>(ResponseCode(c));
  response.set_cookies = std::move(transfer.set_cookies);
  response.text = std::move(transfer.body);
  if (!response.text.empty()) {
    response.body = nlohmann::json::parse(response.text, nullptr, /*allow_exceptions=*/false);
    if (response.body.is_discarded()) response.body = nullptr;
  }
  return response;
}

core::Result<nlohmann::json> ApiClient::CallOk(std::string_view method, std::string_view path,
                                               const nlohmann::json* body) const {
  GPUWERK_ASSIGN_OR_RETURN(ApiResponse response, Call(method, path, body));
  if (!response.ok()) return core::Fail(ErrorFromResponse(response));
  if (response.status != 204 && !response.text.empty() && response.body.is_null()) {
    return core::Fail(ErrorCode::kInternal, "unexpected_response",
                      "the server at " + base_url_ + " answered " + std::string(method) + " " +
                          std::string(path) + " with something that is not JSON; is " + base_url_ +
                          " a gpuwerk server?");
  }
  return std::move(response.body);
}

core::Result<nlohmann::json> ApiClient::GetAllPages(std::string_view path) const {
  constexpr int kMaxPages = 100000;  // a guard against a server that never stops
  nlohmann::json all = nlohmann::json::array();
  int64_t pages = 1;
  for (int page = 1; page <= pages && page <= kMaxPages; ++page) {
    GPUWERK_ASSIGN_OR_RETURN(nlohmann::json body, CallOk("GET", WithPage(path, page)));
    auto parsed = PageFromJson(body);
    if (!parsed) {
      return core::Fail(ErrorCode::kInternal, "unexpected_response",
                        "the server at " + base_url_ + " answered GET " + std::string(path) +
                            " with something that is not a page of items (" +
                            parsed.error().message + ")");
    }
    for (auto& item : parsed->items) all.push_back(std::move(item));
    pages = parsed->pages;
    if (parsed->items.empty()) break;  // past the end, whatever `pages` says
  }
  return all;
}

core::Result<ApiClient::StreamEnd> ApiClient::Stream(std::string_view path,
                                                     const std::vector<std::string>& headers,
                                                     const StreamSink& sink,
                                                     std::chrono::milliseconds idle_timeout) const {
  core::CurlGlobalInitOnce();
  core::CurlEasy curl(curl_easy_init());
  if (!curl) return core::Internal("could not start an HTTP request (curl_easy_init failed)");
  CURL* c = curl.get();
  const std::string url = base_url_ + std::string(path);
  char error_buffer[CURL_ERROR_SIZE] = {};
  StreamTransfer transfer;
  transfer.curl = c;
  transfer.sink = &sink;
  transfer.idle = idle_timeout;
  transfer.error_answer.cancelled = cancelled_;
  core::CurlList header_list(HeaderList(token_, headers));

  SetCommonOptions(c, url, error_buffer, header_list.get(), timeout_, user_agent_, cookie_);
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnStreamBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnStreamHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &OnStreamProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &transfer);

  const CURLcode rc = curl_easy_perform(c);
  StreamEnd end;
  end.response.status = static_cast<int>(ResponseCode(c));
  end.response.set_cookies = std::move(transfer.error_answer.set_cookies);
  end.stopped = transfer.stopped;
  if (rc != CURLE_OK && !transfer.stopped) {
    if (transfer.error_answer.too_large) return core::Fail(TooLarge(base_url_));
    std::string reason =
        transfer.idle_expired
            ? "nothing arrived for " + std::to_string(idle_timeout.count() / 1000) + " s"
            : (error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc));
    if (transfer.streaming) {
      while (!reason.empty() && (reason.back() == '\n' || reason.back() == '.')) reason.pop_back();
      return core::Fail(ErrorCode::kUnavailable, "stream_interrupted",
                        "the event stream from " + base_url_ + " broke off: " + reason);
    }
    return core::Fail(Unreachable(base_url_, unreachable_hint_, std::move(reason)));
  }
  if (!end.response.ok()) {
    end.response.text = std::move(transfer.error_answer.body);
    if (!end.response.text.empty()) {
      end.response.body =
          nlohmann::json::parse(end.response.text, nullptr, /*allow_exceptions=*/false);
      if (end.response.body.is_discarded()) end.response.body = nullptr;
    }
  }
  return end;
}

}  // namespace gpuwerk::protocol
