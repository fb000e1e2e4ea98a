#include "keys/internal/ssh_wire.h"

#include <gtest/gtest.h>

namespace gpuwerk::keys::internal {
namespace {

TEST(WireReaderTest, ReadsStringsAndStopsAtTruncation) {
  const std::string data(
      "\x00\x00\x00\x03"
      "abc"
      "\x00\x00\x00\x00"
      "\x00\x00\x00\x05"
      "xy",
      17);
  WireReader reader(data);
  EXPECT_EQ(reader.ReadString(), "abc");
  EXPECT_EQ(reader.ReadString(), "");
  EXPECT_FALSE(reader.AtEnd());
  EXPECT_EQ(reader.ReadString(), std::nullopt);  // says 5, has 2

  WireReader short_prefix(std::string_view("\x00\x00", 2));
  EXPECT_EQ(short_prefix.ReadString(), std::nullopt);
  WireReader huge(
      std::string_view("\xff\xff\xff\xff"
                       "abc",
                       7));
  EXPECT_EQ(huge.ReadString(), std::nullopt);
  WireReader empty("");
  EXPECT_TRUE(empty.AtEnd());
  EXPECT_EQ(empty.ReadString(), std::nullopt);
}

TEST(WireWriterTest, AppendsStringsAndMpints) {
  std::string out;
  AppendString(out, "ssh-rsa");
  EXPECT_EQ(out, std::string("\x00\x00\x00\x07ssh-rsa", 11));
  out.clear();
  AppendMpint(out, std::string("\x00\x00\x80\x01", 4));  // leading zeros dropped, sign byte added
  EXPECT_EQ(out, std::string("\x00\x00\x00\x03\x00\x80\x01", 7));
  out.clear();
  AppendMpint(out, std::string_view("\x01\x00\x01", 3));
  EXPECT_EQ(out, std::string("\x00\x00\x00\x03\x01\x00\x01", 7));
  out.clear();
  AppendMpint(out, "");
  EXPECT_EQ(out, std::string("\x00\x00\x00\x00", 4));  // zero is the empty mpint (RFC 4251 §5)
}

TEST(MpintTest, OnlyMinimalPositiveIntegersPass) {
  EXPECT_EQ(PositiveMpintMagnitude("\x01\x00\x01"), "\x01\x00\x01");
  EXPECT_EQ(PositiveMpintMagnitude(std::string_view("\x00\x80", 2)), "\x80");
  EXPECT_EQ(PositiveMpintMagnitude(""), std::nullopt);                               // zero
  EXPECT_EQ(PositiveMpintMagnitude("\x80"), std::nullopt);                           // negative
  EXPECT_EQ(PositiveMpintMagnitude(std::string_view("\x00\x01", 2)), std::nullopt);  // padded
  EXPECT_EQ(PositiveMpintMagnitude(std::string_view("\x00", 1)), std::nullopt);
  EXPECT_EQ(BitLength("\x01"), 1);
  EXPECT_EQ(BitLength("\x80"), 8);
  EXPECT_EQ(BitLength(std::string_view("\x01\x00\x01", 3)), 17);
  EXPECT_EQ(BitLength(""), 0);
}

}  // namespace
}  // namespace gpuwerk::keys::internal
