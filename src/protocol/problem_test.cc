#include "protocol/problem.h"

#include <gtest/gtest.h>

#include "protocol/page.h"
#include "protocol/testing/strict_fields.h"

namespace gpuwerk::protocol {
namespace {

using nlohmann::json;
using testing::ExpectStrict;

TEST(ProblemTest, RoundTripsWithExtensions) {
  const Problem p{.type = "about:blank",
                  .title = "Conflict",
                  .status = 409,
                  .detail = "The key is in use by instance a.",
                  .code = "key_in_use",
                  .extensions = {{"instances", json::array({"a"})}}};
  const json j = ToJson(p);
  EXPECT_EQ(j, json({{"type", "about:blank"},
                     {"title", "Conflict"},
                     {"status", 409},
                     {"detail", "The key is in use by instance a."},
                     {"code", "key_in_use"},
                     {"instances", json::array({"a"})}}));
  EXPECT_EQ(ProblemFromJson(j).value(), p);
}

TEST(ProblemTest, AnExtensionNeverOverridesAStandardMember) {
  Problem p{.title = "Not Found", .status = 404, .detail = "gone", .code = "not_found"};
  p.extensions = {{"code", "other"}, {"field", "id"}};
  const json j = ToJson(p);
  EXPECT_EQ(j["code"], "not_found");
  EXPECT_EQ(j["field"], "id");
}

TEST(ProblemTest, RefusesEveryMissingOrMistypedMember) {
  const json j = ToJson(
      Problem{.title = "Bad Request", .status = 400, .detail = "no", .code = "invalid_field"});
  ExpectStrict(j, ProblemFromJson);
  json status = j;
  status["status"] = 42;
  EXPECT_FALSE(ProblemFromJson(status));
}

TEST(PageTest, RoundTripsAndIsStrict) {
  const Page p{
      .items = json::array({{{"id", "a"}}, {{"id", "b"}}}), .page = 2, .pages = 3, .total = 32};
  const json j = ToJson(p);
  EXPECT_EQ(j, json({{"items", p.items}, {"page", 2}, {"pages", 3}, {"total", 32}}));
  EXPECT_EQ(PageFromJson(j).value(), p);
  ExpectStrict(ToJson(Page{.items = json::array(), .page = 1, .pages = 0, .total = 0}),
               PageFromJson);
  // Keyset-paged lists carry cursors.
  const Page cursors{.items = json::array(), .page = 1, .pages = 2, .total = 20, .next = "5.bil_a"};
  EXPECT_EQ(ToJson(cursors).count("prev"), 0u);
  EXPECT_EQ(PageFromJson(ToJson(cursors)).value(), cursors);
  json number_cursor = ToJson(cursors);
  number_cursor["next"] = 5;
  EXPECT_FALSE(PageFromJson(number_cursor));
  json negative = j;
  negative["total"] = -1;
  auto r = PageFromJson(negative);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().details["field"], "total");
}

}  // namespace
}  // namespace gpuwerk::protocol
