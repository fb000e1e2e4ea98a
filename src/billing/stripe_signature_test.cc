#include "billing/stripe_signature.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuwerk::billing {
namespace {

constexpr int64_t kNow = 1'800'000'000;
const std::string kBody = R"({"id": "evt_1"})";
const std::vector<std::string> kSecret = {"whsec_test_secret"};

std::string Header(int64_t t, std::initializer_list<std::string> v1s, std::string extra = "") {
  std::string h = "t=" + std::to_string(t);
  for (const std::string& v : v1s) h += ",v1=" + v;
  return h + extra;
}

std::string Message(const core::Result<void>& r) { return r ? "" : r.error().message; }

TEST(StripeSignatureTest, V1IsHmacSha256OfTimestampDotBodyAsAnIndependentImplementationComputesIt) {
  // python3: hmac.new(b'whsec_test_secret', b'1800000000.{"id": "evt_1"}', sha256).hexdigest()
  EXPECT_EQ(StripeSignatureV1("whsec_test_secret", kNow, kBody),
            "e6009f46ebe3ad9d2f6e9c6e9155a9b856142affe038dd4c54b8a15a2ad3c61e");
}

TEST(StripeSignatureTest, GoodSignatureIsAccepted) {
  const std::string h = Header(kNow, {StripeSignatureV1(kSecret[0], kNow, kBody)});
  EXPECT_TRUE(VerifyStripeSignature(h, kBody, kSecret, kNow))
      << Message(VerifyStripeSignature(h, kBody, kSecret, kNow));
  // Within the tolerance on both sides.
  EXPECT_TRUE(VerifyStripeSignature(h, kBody, kSecret, kNow + 300));
  EXPECT_TRUE(VerifyStripeSignature(h, kBody, kSecret, kNow - 300));
}

TEST(StripeSignatureTest, BadSignatureOrChangedBodyOrOtherSecretIsRefused) {
  const std::string good = StripeSignatureV1(kSecret[0], kNow, kBody);
  std::string flipped = good;
  flipped[0] = flipped[0] == '0' ? '1' : '0';
  for (const auto& r :
       {VerifyStripeSignature(Header(kNow, {flipped}), kBody, kSecret, kNow),
        VerifyStripeSignature(Header(kNow, {good}), kBody + " ", kSecret, kNow),
        VerifyStripeSignature(Header(kNow, {good}), kBody, std::vector<std::string>{"whsec_other"},
                              kNow),
        VerifyStripeSignature(Header(kNow, {good.substr(0, 63)}), kBody, kSecret, kNow),
        // The signature of another timestamp.
        VerifyStripeSignature(Header(kNow + 1, {good}), kBody, kSecret, kNow)}) {
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, core::ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().api_code, "invalid_signature");
    EXPECT_EQ(r.error().message, "no v1 signature matches the webhook signing secret");
  }
}

TEST(StripeSignatureTest, StaleTimestampIsRefusedEvenWithAGoodSignature) {
  const int64_t t = kNow - 301;
  const auto r = VerifyStripeSignature(Header(t, {StripeSignatureV1(kSecret[0], t, kBody)}), kBody,
                                       kSecret, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "invalid_signature");
  EXPECT_EQ(r.error().message, "the webhook's signed timestamp is too old");
}

TEST(StripeSignatureTest, SixMinutesInTheFutureIsRefusedEvenWithAGoodSignature) {
  const int64_t t = kNow + 360;
  const auto r = VerifyStripeSignature(Header(t, {StripeSignatureV1(kSecret[0], t, kBody)}), kBody,
                                       kSecret, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "the webhook's signed timestamp is in the future");
}

TEST(StripeSignatureTest, TwoV1WithTheOldSecretFirstIsAcceptedWithTheNewSecret) {
  // While a secret rolls, Stripe signs with the old and the new one.
  const std::string h = Header(kNow, {StripeSignatureV1("whsec_old", kNow, kBody),
                                      StripeSignatureV1("whsec_new", kNow, kBody)});
  EXPECT_TRUE(VerifyStripeSignature(h, kBody, std::vector<std::string>{"whsec_new"}, kNow));
  EXPECT_TRUE(VerifyStripeSignature(h, kBody, std::vector<std::string>{"whsec_old"}, kNow));
  // Our side may hold both secrets too.
  const std::string only_new = Header(kNow, {StripeSignatureV1("whsec_new", kNow, kBody)});
  EXPECT_TRUE(VerifyStripeSignature(only_new, kBody,
                                    std::vector<std::string>{"whsec_old", "whsec_new"}, kNow));
}

TEST(StripeSignatureTest, OtherSchemesAreIgnored) {
  const std::string good = StripeSignatureV1(kSecret[0], kNow, kBody);
  // A v0 (test mode) entry, a future scheme, spaces around entries: the v1 decides.
  EXPECT_TRUE(VerifyStripeSignature(
      "t=" + std::to_string(kNow) + ", v0=deadbeef ,v1=" + good + ",v9=x", kBody, kSecret, kNow));
  // A matching signature only under another scheme is no signature.
  const auto r =
      VerifyStripeSignature("t=" + std::to_string(kNow) + ",v0=" + good, kBody, kSecret, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "the Stripe-Signature header has no v1 signature");
}

TEST(StripeSignatureTest, MalformedHeadersAreRefused) {
  const std::string good = StripeSignatureV1(kSecret[0], kNow, kBody);
  const std::string t = std::to_string(kNow);
  const std::vector<std::string> malformed = {
      "",
      "garbage",
      "v1=" + good,                            // no timestamp
      "t=" + t,                                // no v1
      "t=,v1=" + good,                         // empty timestamp
      "t=abc,v1=" + good,                      // not a number
      "t=" + t + "x,v1=" + good,               // trailing junk
      "t=-1,v1=" + good,                       // negative
      "t=99999999999999999999999,v1=" + good,  // overflow
      "t=" + t + ",t=" + t + ",v1=" + good,    // two timestamps
      "t=" + t + ",v1=" + good + ",",          // an empty entry
      "t=" + t + ",,v1=" + good,               // an empty entry
      std::string(kStripeSignatureHeaderMaxBytes + 1, 'a'),
  };
  for (const std::string& h : malformed) {
    const auto r = VerifyStripeSignature(h, kBody, kSecret, kNow);
    ASSERT_FALSE(r) << h;
    EXPECT_EQ(r.error().api_code, "invalid_signature") << h;
  }
  std::string many = "t=" + t;
  for (size_t i = 0; i <= kStripeSignatureMaxV1; ++i) many += ",v1=" + good;
  const auto r = VerifyStripeSignature(many, kBody, kSecret, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "the Stripe-Signature header has too many v1 signatures");
}

TEST(StripeSignatureTest, NoSecretConfiguredAcceptsNothing) {
  const std::string h = Header(kNow, {StripeSignatureV1("", kNow, kBody)});
  const auto r = VerifyStripeSignature(h, kBody, std::vector<std::string>{}, kNow);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "no webhook signing secret is configured");
}

}  // namespace
}  // namespace gpuwerk::billing
