#include "api/json_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuwerk::api {
namespace {

using nlohmann::json;

std::string Dumped(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

TEST(JsonWriterTest, WritesWhatNlohmannDumps) {
  JsonWriter w;
  w.BeginObject()
      .Key("items")
      .BeginArray()
      .BeginObject()
      .Member("id", "key_1")
      .Member("bits", 256)
      .Member("open", true)
      .Key("left_at")
      .Null()
      .EndObject()
      .BeginObject()
      .EndObject()
      .EndArray()
      .Member("page", int64_t{1})
      .Key("empty")
      .BeginArray()
      .EndArray()
      .Member("min", std::numeric_limits<int64_t>::min())
      .EndObject();
  json want = {
      {"items", json::array({{{"id", "key_1"}, {"bits", 256}, {"open", true}, {"left_at", nullptr}},
                             json::object()})},
      {"page", 1},
      {"empty", json::array()},
      {"min", std::numeric_limits<int64_t>::min()}};
  // nlohmann sorts object keys; compare as parsed values, and the text of a sorted object.
  const std::string text = w.Take();
  EXPECT_EQ(json::parse(text), want);
  JsonWriter sorted;
  sorted.BeginObject().Member("a", 1).Member("b", "x").EndObject();
  EXPECT_EQ(sorted.Take(), Dumped({{"a", 1}, {"b", "x"}}));
}

TEST(JsonWriterTest, EscapesStringsAsNlohmannDoes) {
  static constexpr char kControl[] = "nul \0 and \x01 \x1f \x7f";
  const std::vector<std::string> cases = {
      "",
      "plain",
      "quote \" backslash \\ slash /",
      "\b\f\n\r\t",
      std::string(kControl, sizeof kControl - 1),
      "ünïcödé ✓ 😀",
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG… bench1@host",
  };
  for (const std::string& s : cases) {
    JsonWriter w;
    w.String(s);
    EXPECT_EQ(w.Take(), Dumped(s)) << s;
  }
}

TEST(JsonWriterTest, ReplacesInvalidUtf8) {
  for (const std::string& bad :
       {std::string("a\xff"
                    "b"),
        std::string("\xc3"), std::string("\xed\xa0\x80"), std::string("\xc0\xaf")}) {
    JsonWriter w;
    w.String(bad);
    const std::string text = w.Take();
    ASSERT_NO_THROW(json::parse(text)) << text;
    EXPECT_NE(json::parse(text).get<std::string>().find("\xEF\xBF\xBD"), std::string::npos);
  }
}

}  // namespace
}  // namespace gpuwerk::api
