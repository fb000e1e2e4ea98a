// EncodeStripeForm: Stripe's form bodies (bracket notation, RFC 3986 percent-encoding).
#include "billing/stripe_client.h"

#include <gtest/gtest.h>

namespace gpuwerk::billing {
namespace {

TEST(StripeFormTest, BracketsAndReservedCharactersArePercentEncodedInOrder) {
  EXPECT_EQ(EncodeStripeForm({{"invoice_settings[default_payment_method]", "pm_1"},
                              {"email", "ada+x@example.com"},
                              {"description", "gpu-box (spark-1x), 61 minutes"}}),
            "invoice_settings%5Bdefault_payment_method%5D=pm_1&email=ada%2Bx%40example.com&"
            "description=gpu-box%20%28spark-1x%29%2C%2061%20minutes");
  EXPECT_EQ(EncodeStripeForm({}), "");
  EXPECT_EQ(EncodeStripeForm({{"a", ""}, {"b", "~._-"}}), "a=&b=~._-");
  EXPECT_EQ(EncodeStripeForm({{"name", "\xc3\xa9&="}}), "name=%C3%A9%26%3D");
}

}  // namespace
}  // namespace gpuwerk::billing
