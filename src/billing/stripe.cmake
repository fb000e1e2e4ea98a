# Stripe's protocol pieces (docs/stripe.md): webhook signatures. Included from src/CMakeLists.txt
# (paths relative to src/) until it joins src/billing/CMakeLists.txt.
gpuwerk_library(NAME billing_stripe
  SRCS billing/stripe_signature.cc
  DEPS gpuwerk::core PkgConfig::SODIUM)
gpuwerk_test(NAME billing_stripe_test
  SRCS billing/stripe_signature_test.cc
  DEPS gpuwerk::billing_stripe)
