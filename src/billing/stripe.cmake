# Stripe (docs/stripe.md): webhook signatures, the Stripe wire format, the `stripe` payment
# provider and its tables. Included from src/CMakeLists.txt (paths relative to src/) until it
# joins src/billing/CMakeLists.txt.
gpuwerk_library(NAME billing_stripe
  SRCS billing/stripe_signature.cc billing/stripe_client.cc billing/stripe_customer_table.cc
       billing/stripe_provider.cc billing/stripe_event_ledger.cc billing/stripe_invoice_ledger.cc billing/stripe_webhooks.cc
  DEPS gpuwerk::core gpuwerk::billing gpuwerk::store gpuwerk::mail gpuwerk::audit gpuwerk::auth CURL::libcurl nlohmann_json::nlohmann_json
       spdlog::spdlog PkgConfig::SODIUM)
gpuwerk_test(NAME billing_stripe_test
  SRCS billing/stripe_signature_test.cc billing/stripe_client_test.cc
  DEPS gpuwerk::billing_stripe)
