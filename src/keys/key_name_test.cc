#include "keys/key_name.h"

#include <gtest/gtest.h>

namespace gpuwerk::keys {
namespace {

TEST(KeyNameTest, AcceptsAndTrimsOrdinaryNames) {
  EXPECT_EQ(ValidateKeyName("laptop"), "laptop");
  EXPECT_EQ(ValidateKeyName("  work laptop 2 \r\n"), "work laptop 2");
  EXPECT_EQ(ValidateKeyName("id_ed25519.pub-backup"), "id_ed25519.pub-backup");
  EXPECT_EQ(ValidateKeyName("x"), "x");
  EXPECT_EQ(ValidateKeyName(std::string(64, 'k')), std::string(64, 'k'));
  EXPECT_EQ(ValidateKeyName("\t" + std::string(64, 'k') + " "), std::string(64, 'k'));
}

TEST(KeyNameTest, RefusesEmptyLongAndOddNames) {
  for (const std::string& bad :
       {std::string(), std::string("   "), std::string(65, 'k'), std::string("a/b"),
        std::string("tab\tinside"), std::string("new\nline"), std::string("caf\xC3\xA9"),
        std::string("semi;colon"), std::string("<script>"), std::string("nul\0x", 5),
        std::string("quote\"")}) {
    auto r = ValidateKeyName(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, core::ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().api_code, "invalid_name");
    EXPECT_FALSE(r.error().message.empty());
  }
  auto r = ValidateKeyName("<script>");
  EXPECT_EQ(r.error().message.find("<script>"), std::string::npos);
}

}  // namespace
}  // namespace gpuwerk::keys
