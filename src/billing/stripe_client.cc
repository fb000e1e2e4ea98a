#include "billing/stripe_client.h"

#include <curl/curl.h>

#include "core/curl_handles.h"

namespace gpuwerk::billing {
namespace {

size_t Append(char* data, size_t size, size_t n, void* user) {
  auto* out = static_cast<std::string*>(user);
  constexpr size_t kMaxAnswer = 4 * 1024 * 1024;
  if (out->size() + size * n > kMaxAnswer) return 0;
  out->append(data, size * n);
  return size * n;
}

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

void Escape(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (Unreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
}

std::string Str(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

core::Error Unavailable(std::string message) {
  return core::Error(core::ErrorCode::kUnavailable, "provider_unavailable",
                     std::move(message) + ". Nothing was changed here; try again in a minute.")
      .WithDetail("retry_after_seconds", kProviderRetryAfterSeconds);
}

/// Stripe's error `code` or `type` as gpuwerk passes it on: only [a-z_], at most 64 bytes
/// (Stripe's codes are such, e.g. "card_declined"); anything else becomes "other".
std::string SafeStripeCode(const std::string& code) {
  if (code.size() > 64) return "other";
  for (char c : code) {
    if (!((c >= 'a' && c <= 'z') || c == '_')) return "other";
  }
  return code;
}

}  // namespace

std::string EncodeStripeForm(const StripeForm& form) {
  std::string out;
  for (const auto& [name, value] : form) {
    if (!out.empty()) out.push_back('&');
    Escape(out, name);
    out.push_back('=');
    Escape(out, value);
  }
  return out;
}

StripeClient::StripeClient(StripeClientOptions options) : options_(std::move(options)) {
  while (!options_.api_base.empty() && options_.api_base.back() == '/')
    options_.api_base.pop_back();
}

core::Result<nlohmann::json> StripeClient::Call(std::string_view method, std::string_view path,
                                                const StripeForm& form,
                                                std::string_view idempotency_key) const {
  return CallEncoded(method, path, EncodeStripeForm(form), idempotency_key);
}

core::Result<nlohmann::json> StripeClient::CallEncoded(std::string_view method,
                                                       std::string_view path,
                                                       const std::string& encoded,
                                                       std::string_view idempotency_key) const {
  core::CurlGlobalInitOnce();
  core::CurlEasy curl(curl_easy_init());
  if (!curl) return core::Fail(Unavailable("Stripe: cannot make an HTTP handle"));
  std::string url = options_.api_base + std::string(path);
  if (method == "GET" && !encoded.empty()) url += "?" + encoded;
  std::vector<std::string> headers = {"Authorization: Bearer " + options_.secret_key,
                                      "Stripe-Version: " + std::string(kStripeApiVersion)};
  if (!idempotency_key.empty())
    headers.push_back("Idempotency-Key: " + std::string(idempotency_key));
  curl_slist* list = nullptr;
  for (const auto& h : headers) {
    if (curl_slist* next = curl_slist_append(list, h.c_str())) list = next;
  }
  core::CurlList header_list(list);
  std::string answer;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  curl_easy_setopt(c, CURLOPT_USERAGENT, "gpuwerk");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
  if (method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(encoded.size()));
    curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, encoded.c_str());
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, std::string(method).c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    return core::Fail(
        Unavailable(std::string("Stripe cannot be reached: ") + curl_easy_strerror(rc)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  nlohmann::json body = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (status >= 500 || status == 429 || !body.is_object()) {
    return core::Fail(Unavailable("Stripe answered HTTP " + std::to_string(status)));
  }
  if (status >= 200 && status < 300) return body;
  const auto found = body.find("error");
  const nlohmann::json error = found != body.end() ? *found : nlohmann::json::object();
  const std::string code = Str(error, "code");
  const std::string type = Str(error, "type");
  const std::string param = Str(error, "param");
  if (code == "resource_missing") {
    return core::Fail(core::Error(core::ErrorCode::kNotFound, "resource_missing",
                                  "Stripe does not know that object")
                          .WithDetail("param", param));
  }
  return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "stripe_error",
                                "Stripe refused the request (HTTP " + std::to_string(status) + ")")
                        .WithDetail("stripe_code", SafeStripeCode(code))
                        .WithDetail("stripe_type", SafeStripeCode(type)));
}

}  // namespace gpuwerk::billing
