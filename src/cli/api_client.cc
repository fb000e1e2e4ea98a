#include "cli/api_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

#include "core/curl_handles.h"

namespace gpuwerk::cli {
namespace {

using core::ErrorCode;

/// Answers larger than this are refused (the API's pages are a few KiB).
constexpr size_t kMaxResponseBytes = 32 * 1024 * 1024;

/// What the write and header callbacks fill in.
struct Transfer {
  std::string body;
  std::vector<std::string> set_cookies;
  bool too_large = false;
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

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  if (line.starts_with("HTTP/")) {
    t->set_cookies.clear();  // a new response (after a 1xx): forget the previous one's headers
  } else if (StartsWithIgnoreCase(line, "set-cookie:")) {
    t->set_cookies.emplace_back(TrimSpace(line.substr(sizeof("set-cookie:") - 1)));
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

/// Called about once a second while the transfer runs: ends a stream that went quiet.
int OnStreamProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<StreamTransfer*>(user);
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
      if (api_code.ends_with("_taken") || api_code.ends_with("_exists") ||
          api_code.starts_with("already_")) {
        return ErrorCode::kAlreadyExists;
      }
      return ErrorCode::kFailedPrecondition;
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

core::Error ErrorFromResponse(const ApiResponse& response) {
  const int status = response.status;
  const nlohmann::json& body = response.body;
  std::string api_code = "http_" + std::to_string(status);
  std::string message;
  nlohmann::json details = nlohmann::json::object();
  if (body.is_object()) {
    if (auto it = body.find("code"); it != body.end() && it->is_string() && !it->empty()) {
      api_code = it->get<std::string>();
    }
    if (auto it = body.find("detail"); it != body.end() && it->is_string()) {
      message = it->get<std::string>();
    }
    if (auto it = body.find("title"); message.empty() && it != body.end() && it->is_string()) {
      message = it->get<std::string>();
    }
    for (const auto& [key, value] : body.items()) {
      if (key != "type" && key != "title" && key != "status" && key != "detail" && key != "code") {
        details[key] = value;
      }
    }
  }
  if (message.empty()) {
    message = "the server answered HTTP " + std::to_string(status) +
              (body.is_null() ? " with a body that is not JSON" : " without an explanation");
  }
  core::Error error(ErrorCodeForStatus(status, api_code), std::move(api_code), std::move(message));
  error.details = std::move(details);
  return error;
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

core::Result<ApiResponse> ApiClient::Call(std::string_view method, std::string_view path,
                                          const nlohmann::json* body,
                                          const std::vector<std::string>& headers) const {
  core::CurlGlobalInitOnce();
  core::CurlEasy curl(curl_easy_init());
  if (!curl) return core::Internal("could not start an HTTP request (curl_easy_init failed)");
  CURL* c = curl.get();

  const std::string url = base_url_ + std::string(path);
  const std::string method_str(method);
  std::string payload;
  Transfer transfer;
  char error_buffer[CURL_ERROR_SIZE] = {};

  curl_slist* list = nullptr;
  auto add_header = [&list](const std::string& h) {
    if (curl_slist* next = curl_slist_append(list, h.c_str())) list = next;
  };
  add_header("Accept: application/json, application/problem+json");
  add_header("Expect:");  // no "Expect: 100-continue" round trip for larger bodies
  if (body != nullptr) {
    add_header("Content-Type: application/json");
  } else {
    add_header("Content-Type:");  // drop the form content type curl adds to a bare POST
  }
  if (!token_.empty()) add_header("Authorization: Bearer " + token_);
  for (const auto& h : headers) add_header(h);
  core::CurlList header_list(list);

  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "gpuwerk-cli");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  if (!cookie_.empty()) curl_easy_setopt(c, CURLOPT_COOKIE, cookie_.c_str());

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

  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    if (transfer.too_large) {
      return core::Fail(ErrorCode::kPayloadTooLarge, "response_too_large",
                        "the answer from the gpuwerk server at " + base_url_ +
                            " is larger than the client accepts (32 MiB)");
    }
    std::string reason = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '.')) reason.pop_back();
    curl_off_t connect_us = 0;
    curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
    if (rc == CURLE_OPERATION_TIMEDOUT && connect_us > 0) {
      return core::Fail(
          ErrorCode::kDeadlineExceeded, "server_timeout",
          "the gpuwerk server at " + base_url_ + " did not answer in time: " + reason);
    }
    return core::Fail(ErrorCode::kUnavailable, "server_unreachable",
                      "cannot reach the gpuwerk server at " + base_url_ + ": " + reason +
                          ". Is it running? Set GPUWERK_URL or run 'gpuwerk login --url URL'");
  }

  ApiResponse response;
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
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
  int pages = 1;
  for (int page = 1; page <= pages && page <= kMaxPages; ++page) {
    GPUWERK_ASSIGN_OR_RETURN(nlohmann::json body, CallOk("GET", WithPage(path, page)));
    const bool is_page = body.is_object() && body.contains("items") && body["items"].is_array() &&
                         body.contains("pages") && body["pages"].is_number_integer();
    if (!is_page) {
      return core::Fail(ErrorCode::kInternal, "unexpected_response",
                        "the server at " + base_url_ + " answered GET " + std::string(path) +
                            " with something that is not a page of items");
    }
    for (auto& item : body["items"]) all.push_back(std::move(item));
    pages = body["pages"].get<int>();
    if (body["items"].empty()) break;  // past the end, whatever `pages` says
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

  curl_slist* list = nullptr;
  auto add_header = [&list](const std::string& h) {
    if (curl_slist* next = curl_slist_append(list, h.c_str())) list = next;
  };
  if (!token_.empty()) add_header("Authorization: Bearer " + token_);
  for (const auto& h : headers) add_header(h);
  core::CurlList header_list(list);

  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "gpuwerk-cli");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnStreamBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnStreamHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &OnStreamProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &transfer);
  if (!cookie_.empty()) curl_easy_setopt(c, CURLOPT_COOKIE, cookie_.c_str());

  const CURLcode rc = curl_easy_perform(c);
  StreamEnd end;
  end.response.status = static_cast<int>(ResponseCode(c));
  end.response.set_cookies = std::move(transfer.error_answer.set_cookies);
  end.stopped = transfer.stopped;
  if (rc != CURLE_OK && !transfer.stopped) {
    if (transfer.error_answer.too_large) {
      return core::Fail(ErrorCode::kPayloadTooLarge, "response_too_large",
                        "the answer from the gpuwerk server at " + base_url_ +
                            " is larger than the client accepts (32 MiB)");
    }
    std::string reason =
        transfer.idle_expired
            ? "nothing arrived for " + std::to_string(idle_timeout.count() / 1000) + " s"
            : (error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(rc));
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '.')) reason.pop_back();
    if (transfer.streaming) {
      return core::Fail(ErrorCode::kUnavailable, "stream_interrupted",
                        "the event stream from " + base_url_ + " broke off: " + reason);
    }
    return core::Fail(ErrorCode::kUnavailable, "server_unreachable",
                      "cannot reach the gpuwerk server at " + base_url_ + ": " + reason +
                          ". Is it running? Set GPUWERK_URL or run 'gpuwerk login --url URL'");
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

std::vector<ServerSentEvent> SseParser::Feed(std::string_view bytes) {
  std::vector<ServerSentEvent> out;
  buffer_.append(bytes);
  if (!started_) {
    static constexpr std::string_view kBom = "\xEF\xBB\xBF";
    if (buffer_.size() < kBom.size() && kBom.starts_with(buffer_)) return out;  // wait
    if (buffer_.starts_with(kBom)) buffer_.erase(0, kBom.size());
    started_ = true;
  }
  size_t pos = 0;
  while (true) {
    const size_t end = buffer_.find_first_of("\r\n", pos);
    if (end == std::string::npos) break;
    size_t next = end + 1;
    if (buffer_[end] == '\r') {
      if (end + 1 == buffer_.size()) break;  // a LF may follow in the next bytes
      if (buffer_[end + 1] == '\n') next = end + 2;
    }
    Line(std::string_view(buffer_).substr(pos, end - pos), out);
    pos = next;
  }
  buffer_.erase(0, pos);
  return out;
}

void SseParser::Line(std::string_view line, std::vector<ServerSentEvent>& out) {
  if (line.empty()) {  // dispatch
    if (!data_.empty()) {
      data_.pop_back();  // the last "\n"
      ServerSentEvent event;
      if (!type_.empty()) event.type = type_;
      event.data = std::move(data_);
      event.id = last_id_;
      out.push_back(std::move(event));
    }
    data_.clear();
    type_.clear();
    return;
  }
  if (line.front() == ':') {
    ++comments_;
    return;
  }
  std::string_view field = line, value;
  if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
  }
  if (field == "event") {
    type_ = std::string(value);
  } else if (field == "data") {
    data_.append(value);
    data_ += '\n';
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = std::string(value);
  } else if (field == "retry") {
    if (!value.empty() && value.size() <= 18 &&
        std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      retry_ms_ = std::stoll(std::string(value));
    }
  }
}

}  // namespace gpuwerk::cli
