#pragma once

// A local stand-in for the Stripe API endpoints gpuwerk uses (not Stripe):
// tests/support/stripe_stand_in.py as a child process. Its shapes and parameter names come from
// Stripe's published OpenAPI description (tests/support/stripe_openapi_subset.json, API version
// in StripeStandIn::kApiVersion); it checks every request's parameters against it and
// idempotency keys as Stripe does, and has test hooks (/_test/…) that "pay" a Checkout and
// deliver signed webhooks. See the script's docstring for the hooks.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/listening_child.h"
#include "tests/support/source_dir.h"

namespace gpuwerk::testing {

/// The child process (ListeningChild). Killed (and reaped) by Stop or the destructor;
/// PR_SET_PDEATHSIG kills it if this test process dies first.
class StripeStandIn {
 public:
  /// The Stripe API version the stand-in speaks (the subset's api_version).
  static constexpr const char* kApiVersion = "2023-08-16";

  StripeStandIn() = default;
  StripeStandIn(const StripeStandIn&) = delete;
  StripeStandIn& operator=(const StripeStandIn&) = delete;

  /// Why the stand-in cannot run here, or nullopt when it can.
  static std::optional<std::string> Unavailable() {
    if (::access("/usr/bin/python3", X_OK) != 0) return std::string("/usr/bin/python3 is missing");
    return std::nullopt;
  }

  /// Starts it on any free port, requiring `api_key` as the Bearer key and signing webhooks for
  /// `webhook_url` (may be "" and set later through POST /_test/webhook) with `webhook_secret`.
  /// False with a reason in `error` when it did not report "listening <port>" within 20 s.
  bool Start(const std::string& api_key, const std::string& webhook_url,
             const std::string& webhook_secret, std::string* error) {
    std::vector<std::string> args = {
        "/usr/bin/python3",
        (std::filesystem::path(SourceDir()) / "tests/support/stripe_stand_in.py").string(),
        "0",
        "--api-key",
        api_key,
        "--webhook-url",
        webhook_url,
        "--webhook-secret",
        webhook_secret};
    return child_.Start(std::move(args), "the Stripe stand-in", error);
  }

  /// Terminates and reaps it; idempotent.
  void Stop() { child_.Stop(); }

  int port() const { return child_.port(); }
  /// "http://127.0.0.1:<port>": the API base URL to configure (Stripe's is https://api.stripe.com).
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port()); }

 private:
  ListeningChild child_;
};

}  // namespace gpuwerk::testing
