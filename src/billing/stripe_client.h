#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace gpuwerk::billing {

/// The Stripe API version gpuwerk speaks (`Stripe-Version` on every request, docs/stripe.md).
inline constexpr std::string_view kStripeApiVersion = "2023-08-16";

/// The Retry-After (seconds) a `provider_unavailable` error carries (details.retry_after_seconds,
/// which the API answers as the Retry-After header of its 503).
inline constexpr int64_t kProviderRetryAfterSeconds = 30;

/// A form body in order, bracket notation in the names as Stripe takes it, e.g.
/// {"invoice_settings[default_payment_method]", "pm_…"}.
using StripeForm = std::vector<std::pair<std::string, std::string>>;

/// Percent-encodes `form` as application/x-www-form-urlencoded (RFC 3986 unreserved characters
/// kept, everything else %XX; brackets encoded as Stripe's libraries do).
std::string EncodeStripeForm(const StripeForm& form);

/// How to reach Stripe.
struct StripeClientOptions {
  std::string api_base = "https://api.stripe.com";  ///< no trailing "/"; the stand-in in tests
  std::string secret_key;                           ///< "sk_…"; sent as `Authorization: Bearer`
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};  ///< per request
};

/// The one wire format of the Stripe REST API in gpuwerk (https://stripe.com/docs/api): form
/// bodies, `Authorization: Bearer`, `Stripe-Version: 2023-08-16`, `Idempotency-Key` on POSTs that
/// carry one, JSON answers. Over libcurl; each call opens its own handle, so const calls are
/// thread-safe. Never logs the key.
class StripeClient {
 public:
  explicit StripeClient(StripeClientOptions options);

  /// Sends `method` ("GET", "POST", "DELETE") to `path` (e.g. "/v1/customers", ids already
  /// path-safe: Stripe ids are [A-Za-z0-9_]) with `form` (the query for GET, the body
  /// otherwise) and returns the answer's JSON object.
  ///
  /// Errors: kUnavailable `provider_unavailable` (not reachable, timeout, a 5xx, 429, an answer
  /// that is not JSON; its message says to try again, details.retry_after_seconds
  /// kProviderRetryAfterSeconds); kNotFound `resource_missing` (Stripe's error code
  /// resource_missing, details.param names what); kFailedPrecondition `stripe_error` for other
  /// Stripe errors (details.stripe_code holds Stripe's `code`, details.stripe_type its `type`,
  /// each only when it is 1..64 of [a-z_], else "other"; "" when Stripe gave none).
  core::Result<nlohmann::json> Call(std::string_view method, std::string_view path,
                                    const StripeForm& form = {},
                                    std::string_view idempotency_key = {}) const;

  /// Call with the body (or query) already encoded (EncodeStripeForm): a retry resends the
  /// exact bytes stored beside its idempotency key. Errors: Call's.
  core::Result<nlohmann::json> CallEncoded(std::string_view method, std::string_view path,
                                           const std::string& encoded,
                                           std::string_view idempotency_key = {}) const;

 private:
  StripeClientOptions options_;
};

}  // namespace gpuwerk::billing
