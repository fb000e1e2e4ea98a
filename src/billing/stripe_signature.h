#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::billing {

/// How far (seconds) a webhook's signed timestamp may lie from our clock, in either direction
/// (Stripe's libraries' default tolerance; a replay older than this is refused, and so is a
/// timestamp from the future beyond it).
inline constexpr int64_t kStripeSignatureToleranceSeconds = 300;

/// The most a `Stripe-Signature` header may hold before it is refused unread: bytes, and `v1`
/// values (Stripe sends one per active endpoint secret: two while a secret rolls).
inline constexpr size_t kStripeSignatureHeaderMaxBytes = 4096;
inline constexpr size_t kStripeSignatureMaxV1 = 8;

/// Lowercase hex HMAC-SHA256 with `secret` as the key over "<timestamp>.<body>": the value of a
/// `v1=` entry of Stripe's `Stripe-Signature` header (https://stripe.com/docs/webhooks
/// "Verify events manually"). libsodium underneath (crypto_auth_hmacsha256, any key length).
std::string StripeSignatureV1(std::string_view secret, int64_t timestamp, std::string_view body);

/// Checks a webhook delivery: `header` is the raw `Stripe-Signature` value
/// (`t=<unix seconds>,v1=<hex>[,v1=<hex>…][,v0=…]`), `raw_body` the request body exactly as it
/// arrived (never re-serialised JSON), `secrets` the endpoint's signing secrets (`whsec_…`; more
/// than one while the operator rolls them), `now_unix` our clock.
///
/// Accepted when the timestamp is within kStripeSignatureToleranceSeconds of `now_unix` (in
/// both directions) and any `v1` value equals StripeSignatureV1 of any secret (compared in
/// constant time). Entries of other schemes (`v0`, unknown names) are ignored; an entry
/// without `=` is malformed. The header is checked before any HMAC is computed.
///
/// Errors, all kInvalidArgument (a 400, nothing changed) with api_code `invalid_signature` and a
/// message that says which check failed (never echoing the header): malformed header (empty,
/// over kStripeSignatureHeaderMaxBytes, no or non-numeric `t`, two `t`, no `v1`, more than
/// kStripeSignatureMaxV1 `v1`); timestamp outside the tolerance; no secret configured; no
/// `v1` matches.
core::Result<void> VerifyStripeSignature(
    std::string_view header, std::string_view raw_body, std::span<const std::string> secrets,
    int64_t now_unix, int64_t tolerance_seconds = kStripeSignatureToleranceSeconds);

}  // namespace gpuwerk::billing
