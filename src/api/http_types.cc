#include "api/http_types.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <system_error>

#include "core/host_address.h"
#include "core/strings.h"

namespace gpuwerk::api {
namespace {

using nlohmann::json;

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view FindHeader(const HeaderList& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

/// Number of Unicode code points in valid UTF-8 (counts the bytes that start a sequence).
size_t CodePointCount(std::string_view utf8) {
  size_t n = 0;
  for (char c : utf8) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

core::Error FieldError(std::string_view field, std::string message) {
  return std::move(
             core::Error(core::ErrorCode::kInvalidArgument, "invalid_field", std::move(message)))
      .WithDetail("field", std::string(field));
}

/// The member `field` of `object`, nullptr when `object` is not an object or has no such member.
const json* Member(const json& object, std::string_view field) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(field);
  return it == object.end() ? nullptr : &*it;
}

/// What a person calls the value of `field`, with its article ("an email address"): the
/// messages below are shown as they are in the dashboard and the CLI; `detail.field` keeps the
/// API's name for programs.
std::string FieldNoun(std::string_view field) {
  if (field == "email") return "an email address";
  if (field == "password") return "a password";
  if (field == "name") return "a name";
  if (field == "token") return "the link's token";
  if (field == "role") return "a role";
  return "a value for '" + std::string(field) + "'";
}

std::string Capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

core::Result<std::string> CheckStringLength(std::string_view field, const std::string& value,
                                            size_t max_len, size_t min_len) {
  size_t n = CodePointCount(value);
  if (n < min_len) {
    return std::unexpected(
        FieldError(field, min_len == 1 ? "Enter " + FieldNoun(field) + "."
                                       : Capitalized(FieldNoun(field)) + " needs at least " +
                                             std::to_string(min_len) + " characters."));
  }
  if (n > max_len) {
    return std::unexpected(FieldError(field, Capitalized(FieldNoun(field)) + " can have at most " +
                                                 std::to_string(max_len) + " characters."));
  }
  return value;
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_as_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = HexValue(text[i + 1]);
      int lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<HostAndPort> ParseHostAndPort(std::string_view authority) {
  std::string_view host = authority;
  std::string_view port;
  bool bracketed = false;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    bracketed = true;
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return std::nullopt;
  }
  // Inside brackets only an IPv6 literal; outside, no ':' at all (so never an IPv6 literal).
  if (bracketed != (host.find(':') != std::string_view::npos)) return std::nullopt;
  if (!core::IsHostAddress(host)) return std::nullopt;
  HostAndPort out;
  if (!port.empty()) {
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.size() > 5 || ec != std::errc() || end != port.data() + port.size() || value < 1 ||
        value > 65535 || port.front() == '+' || port.front() == '-') {
      return std::nullopt;
    }
    out.port = value;
  }
  out.host.reserve(host.size() + 2);
  if (bracketed) out.host.push_back('[');
  for (char c : host) out.host.push_back(AsciiLower(c));
  if (bracketed) out.host.push_back(']');
  return out;
}

std::optional<std::map<std::string, std::string>> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    size_t eq = part.find('=');
    auto name = PercentDecode(part.substr(0, eq), true);
    auto value = PercentDecode(eq == std::string_view::npos ? "" : part.substr(eq + 1), true);
    if (!name || !value) return std::nullopt;
    out.emplace(std::move(*name), std::move(*value));  // emplace keeps the first value
  }
  return out;
}

std::optional<std::string> DuplicateQueryName(std::string_view query) {
  std::set<std::string> seen;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    auto name = PercentDecode(part.substr(0, part.find('=')), true);
    if (!name) return std::nullopt;
    if (!seen.insert(*name).second) return *name;
  }
  return std::nullopt;
}

std::string_view Request::Header(std::string_view name) const { return FindHeader(headers, name); }

std::string Request::Cookie(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (!EqualsIgnoreCase(key, "Cookie")) continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      size_t semi = rest.find(';');
      std::string_view pair = core::Trim(rest.substr(0, semi));
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
      size_t eq = pair.find('=');
      if (eq == std::string_view::npos) continue;
      if (core::Trim(pair.substr(0, eq)) != name) continue;
      std::string_view v = core::Trim(pair.substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return std::string(v);
    }
  }
  return {};
}

std::string Request::PathParam(std::string_view name) const {
  auto it = path_params.find(std::string(name));
  return it == path_params.end() ? std::string() : it->second;
}

core::Result<int64_t> Request::QueryInt(std::string_view name, int64_t default_value) const {
  auto it = query.find(std::string(name));
  if (it == query.end() || it->second.empty()) return default_value;
  const std::string& text = it->second;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return core::Fail(
        std::move(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                              "query parameter '" + std::string(name) + "' must be an integer"))
            .WithDetail("parameter", std::string(name)));
  }
  return value;
}

Response Response::Json(int status, const nlohmann::json& value) {
  Response r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Response Response::JsonText(int status, std::string json_text) {
  Response r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = std::move(json_text);
  return r;
}

Response Response::Text(int status, std::string body, std::string content_type) {
  Response r;
  r.status = status;
  r.headers.emplace_back("Content-Type", std::move(content_type));
  r.body = std::move(body);
  return r;
}

Response Response::Html(int status, std::string body) {
  return Text(status, std::move(body), "text/html; charset=utf-8");
}

Response Response::NoContent() {
  Response r;
  r.status = 204;
  return r;
}

Response Response::Redirect(std::string location, int status) {
  Response r;
  r.status = status;
  r.headers.emplace_back("Location", std::move(location));
  return r;
}

std::string_view Response::Header(std::string_view name) const { return FindHeader(headers, name); }

Response& Response::SetHeader(std::string name, std::string value) {
  std::erase_if(headers, [&](const auto& h) { return EqualsIgnoreCase(h.first, name); });
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}

Response& Response::AddHeader(std::string name, std::string value) {
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}

int HttpStatusFor(core::ErrorCode code) {
  using core::ErrorCode;
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kFailedPrecondition:
      return 409;
    case ErrorCode::kPaymentRequired:
      return 402;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kDeadlineExceeded:
      return 504;
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 402:
      return "Payment Required";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
  }
  return "Unknown";
}

Response Problem(const core::Error& error) { return Problem(HttpStatusFor(error.code), error); }

Response Problem(int status, const core::Error& error) {
  json body = {
      {"type", "about:blank"},   {"title", ReasonPhrase(status)}, {"status", status},
      {"detail", error.message}, {"code", error.api_code},
  };
  if (error.details.is_object()) {
    for (const auto& [key, value] : error.details.items()) {
      if (!body.contains(key)) body[key] = value;
    }
  }
  Response r = Response::Json(status, body);
  r.SetHeader("Content-Type", "application/problem+json");
  return r;
}

core::Result<void> RefuseBody(const Request& request) {
  if (request.body.empty()) return {};
  const json value = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return core::InvalidArgument("invalid_json",
                                 "the request body is not valid JSON; this route takes no body "
                                 "(send none, or {})");
  }
  if (value.is_object() && value.empty()) return {};
  if (value.is_object()) {
    const std::string field = value.begin().key();
    return std::unexpected(
        FieldError(field, "unknown field '" + field + "'; this request takes no fields"));
  }
  return core::InvalidArgument("invalid_field",
                               "this route takes no request body; send none (or {})");
}

core::Result<nlohmann::json> ParseJsonBody(const Request& request) {
  std::string_view content_type = request.Header("Content-Type");
  if (!content_type.empty()) {
    std::string_view media = core::Trim(content_type.substr(0, content_type.find(';')));
    if (!EqualsIgnoreCase(media, "application/json")) {
      return core::InvalidArgument("invalid_json",
                                   "the request body must be JSON (Content-Type: "
                                   "application/json)");
    }
  }
  if (request.body.empty()) {
    return core::InvalidArgument("invalid_json",
                                 "the request body is empty; expected a JSON object");
  }
  // nlohmann's parser keeps the last of duplicate keys; its parser callback sees every key, so
  // each open object's keys are tracked here and the first repeat is remembered.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  const json::parser_callback_t on_event = [&](int /*depth*/, json::parse_event_t event,
                                               json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && parsed.is_string() &&
            !open_objects.back().insert(parsed.get<std::string>()).second && !duplicate) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json value = json::parse(request.body, on_event, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return core::InvalidArgument("invalid_json", "the request body is not valid JSON");
  }
  if (!value.is_object()) {
    return core::InvalidArgument("invalid_json", "the request body must be a JSON object");
  }
  if (duplicate) {
    return std::unexpected(
        FieldError(*duplicate, "field '" + *duplicate + "' occurs more than once in an object"));
  }
  return value;
}

core::Result<void> RefuseUnknownFields(const nlohmann::json& object,
                                       std::initializer_list<std::string_view> fields,
                                       std::string_view path) {
  if (!object.is_object()) return {};
  for (const auto& [key, value] : object.items()) {
    if (std::find(fields.begin(), fields.end(), key) != fields.end()) continue;
    std::string name = std::string(path) + key;
    std::string known;
    for (std::string_view f : fields) known += (known.empty() ? "" : ", ") + std::string(f);
    return std::unexpected(
        FieldError(name, "unknown field '" + name + "'" +
                             (known.empty() ? std::string("; this request takes no fields")
                                            : "; this request takes " + known)));
  }
  return {};
}

core::Result<nlohmann::json> ParseJsonObject(const Request& request,
                                             std::initializer_list<std::string_view> fields) {
  GPUWERK_ASSIGN_OR_RETURN(json value, ParseJsonBody(request));
  GPUWERK_TRY(RefuseUnknownFields(value, fields));
  return value;
}

core::Result<std::string> RequireString(const nlohmann::json& object, std::string_view field,
                                        size_t max_len, size_t min_len) {
  const json* v = Member(object, field);
  if (v == nullptr || v->is_null()) {
    return std::unexpected(FieldError(field, "field '" + std::string(field) + "' is required"));
  }
  if (!v->is_string()) {
    return std::unexpected(
        FieldError(field, "field '" + std::string(field) + "' must be a string"));
  }
  return CheckStringLength(field, v->get_ref<const std::string&>(), max_len, min_len);
}

core::Result<std::optional<std::string>> OptionalString(const nlohmann::json& object,
                                                        std::string_view field, size_t max_len,
                                                        size_t min_len) {
  const json* v = Member(object, field);
  if (v == nullptr || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) {
    return std::unexpected(
        FieldError(field, "field '" + std::string(field) + "' must be a string"));
  }
  GPUWERK_ASSIGN_OR_RETURN(
      std::string s, CheckStringLength(field, v->get_ref<const std::string&>(), max_len, min_len));
  return std::optional<std::string>(std::move(s));
}

core::Result<int64_t> RequireInt(const nlohmann::json& object, std::string_view field, int64_t min,
                                 int64_t max) {
  const json* v = Member(object, field);
  if (v == nullptr || v->is_null()) {
    return std::unexpected(FieldError(field, "field '" + std::string(field) + "' is required"));
  }
  std::optional<int64_t> value;
  if (v->is_number_integer() && !v->is_number_unsigned()) {
    value = v->get<int64_t>();
  } else if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      value = static_cast<int64_t>(u);
    }
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    // 2^63 is exactly representable; anything at or above it does not fit.
    if (std::isfinite(d) && d == std::floor(d) && d >= -9223372036854775808.0 &&
        d < 9223372036854775808.0) {
      value = static_cast<int64_t>(d);
    }
  } else {
    return std::unexpected(
        FieldError(field, "field '" + std::string(field) + "' must be an integer"));
  }
  if (!value || *value < min || *value > max) {
    return std::unexpected(
        FieldError(field, "field '" + std::string(field) + "' must be an integer from " +
                              std::to_string(min) + " to " + std::to_string(max)));
  }
  return *value;
}

core::Result<bool> RequireBool(const nlohmann::json& object, std::string_view field) {
  const json* v = Member(object, field);
  if (v == nullptr || v->is_null()) {
    return std::unexpected(FieldError(field, "field '" + std::string(field) + "' is required"));
  }
  if (!v->is_boolean()) {
    return std::unexpected(
        FieldError(field, "field '" + std::string(field) + "' must be true or false"));
  }
  return v->get<bool>();
}

}  // namespace gpuwerk::api
