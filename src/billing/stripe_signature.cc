#include "billing/stripe_signature.h"

#include <sodium.h>

#include <charconv>
#include <optional>
#include <vector>

#include "core/encoding.h"

namespace gpuwerk::billing {
namespace {

core::Result<void> Refuse(std::string message) {
  return core::InvalidArgument("invalid_signature", std::move(message));
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string StripeSignatureV1(std::string_view secret, int64_t timestamp, std::string_view body) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(secret.data()),
                              secret.size());
  const std::string prefix = std::to_string(timestamp) + ".";
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(prefix.data()),
                                prefix.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(body.data()),
                                body.size());
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&state, mac);
  return core::HexEncode(std::string_view(reinterpret_cast<const char*>(mac), sizeof mac));
}

core::Result<void> VerifyStripeSignature(std::string_view header, std::string_view raw_body,
                                         std::span<const std::string> secrets, int64_t now_unix,
                                         int64_t tolerance_seconds) {
  if (header.empty()) return Refuse("the Stripe-Signature header is missing");
  if (header.size() > kStripeSignatureHeaderMaxBytes) {
    return Refuse("the Stripe-Signature header is too long");
  }
  std::optional<int64_t> timestamp;
  std::vector<std::string_view> v1;
  size_t start = 0;
  while (start <= header.size()) {
    size_t end = header.find(',', start);
    if (end == std::string_view::npos) end = header.size();
    const std::string_view item = Trim(header.substr(start, end - start));
    start = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Refuse("the Stripe-Signature header is malformed (an entry without '=')");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "t") {
      int64_t t = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), t);
      if (timestamp.has_value() || value.empty() || ec != std::errc() ||
          ptr != value.data() + value.size() || t < 0) {
        return Refuse("the Stripe-Signature header has no single numeric timestamp");
      }
      timestamp = t;
    } else if (key == "v1") {
      if (v1.size() == kStripeSignatureMaxV1) {
        return Refuse("the Stripe-Signature header has too many v1 signatures");
      }
      v1.push_back(value);
    }
    // Other schemes (v0, test-mode extras, future ones) are ignored, as Stripe's libraries do.
  }
  if (!timestamp.has_value()) return Refuse("the Stripe-Signature header has no timestamp");
  if (v1.empty()) return Refuse("the Stripe-Signature header has no v1 signature");
  if (*timestamp < now_unix - tolerance_seconds) {
    return Refuse("the webhook's signed timestamp is too old");
  }
  if (*timestamp > now_unix + tolerance_seconds) {
    return Refuse("the webhook's signed timestamp is in the future");
  }
  if (secrets.empty()) return Refuse("no webhook signing secret is configured");
  bool match = false;
  for (const std::string& secret : secrets) {
    const std::string expected = StripeSignatureV1(secret, *timestamp, raw_body);
    for (std::string_view candidate : v1) {
      // Every pair is compared (no early exit) so timing says nothing about which matched.
      if (candidate.size() == expected.size() && core::ConstantTimeEquals(candidate, expected)) {
        match = true;
      }
    }
  }
  if (!match) return Refuse("no v1 signature matches the webhook signing secret");
  return {};
}

}  // namespace gpuwerk::billing
