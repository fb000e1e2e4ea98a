#include "cli/output.h"

#include <gtest/gtest.h>

#include <sstream>

namespace gpuwerk::cli {
namespace {

TEST(TableTest, PadsColumnsToTheWidestCellWithTwoSpaces) {
  Table table({"NAME", "TYPE", "CREATED"});
  table.AddRow({"laptop", "ssh-ed25519", "2026-01-02T03:04:05Z"});
  table.AddRow({"a", "ssh-rsa", "2026-01-03T00:00:00Z"});
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.Render(),
            "NAME    TYPE         CREATED\n"
            "laptop  ssh-ed25519  2026-01-02T03:04:05Z\n"
            "a       ssh-rsa      2026-01-03T00:00:00Z\n");
}

TEST(TableTest, HeaderOnlyAndNoTrailingBlanks) {
  Table table({"ID", "LAST USED", ""});
  table.AddRow({"tok_1", "", ""});
  EXPECT_EQ(table.Render(),
            "ID     LAST USED\n"
            "tok_1\n");
}

TEST(TableTest, ShortRowsAreBlankFilledAndLongOnesCut) {
  Table table({"A", "B"});
  table.AddRow({"x"});
  table.AddRow({"1", "2", "3"});
  EXPECT_EQ(table.Render(), "A  B\nx\n1  2\n");
}

TEST(TableTest, CountsUtf8CodePointsForWidth) {
  Table table({"NAME", "X"});
  table.AddRow({"schlüssel", "1"});
  table.AddRow({"key", "2"});
  EXPECT_EQ(table.Render(),
            "NAME       X\n"
            "schlüssel  1\n"
            "key        2\n");
}

TEST(TableTest, ControlCharactersCannotBreakTheLayout) {
  Table table({"NAME", "X"});
  table.AddRow({"evil\nname\x1b[31m", "1"});
  EXPECT_EQ(table.Render(),
            "NAME            X\n"
            "evil?name?[31m  1\n");
}

TEST(SafeTextTest, ReplacesC0DelAndC1Controls) {
  EXPECT_EQ(SafeText("a\tb\rc\x7f"), "a?b?c?");
  EXPECT_EQ(SafeText("x\xc2\x9b"
                     "y"),
            "x?y");
  EXPECT_EQ(SafeText("caf\xc3\xa9 \xc2\xa0"), "caf\xc3\xa9 \xc2\xa0");  // é and NBSP stay
}

// Breaker finding (relay refusal reports): `gpuwerk admin audit` printed a forged target's
// U+202E as it was, so the rest of the line read backwards. Direction controls and invisible
// characters are neutralised as ESC and newlines are, and so is a byte that is not UTF-8.
TEST(SafeTextTest, ReplacesDirectionControlsZeroWidthCharactersAndBadBytes) {
  EXPECT_EQ(SafeText("ins_\u202eFAKE"), "ins_?FAKE");
  EXPECT_EQ(SafeText("a\u202ab\u202bc\u202cd\u202de\u202ef"), "a?b?c?d?e?f");
  EXPECT_EQ(SafeText("a\u2066b\u2067c\u2068d\u2069e"), "a?b?c?d?e");
  EXPECT_EQ(SafeText("a\u200eb\u200fc\u061cd"), "a?b?c?d");
  EXPECT_EQ(SafeText("zero\u200bwidth\u200c\u200d\u2060\ufeff"), "zero?width????");
  EXPECT_EQ(SafeText("x\x9by \xff"), "x?y ?");
  Table table({"TARGET"});
  table.AddRow({"ins_\x1b[2J\nroot@x:~# \u202eexe.txt"});
  EXPECT_EQ(table.Render(), "TARGET\nins_?[2J?root@x:~# ?exe.txt\n");
}

TEST(CellTextTest, StringsAsIsNullAsDashOthersDumped) {
  EXPECT_EQ(CellText("abc"), "abc");
  EXPECT_EQ(CellText(nullptr), "-");
  EXPECT_EQ(CellText(42), "42");
  EXPECT_EQ(CellText(true), "true");
}

TEST(JsonOutputTest, PrettyWithTwoSpacesAndANewline) {
  nlohmann::json items = nlohmann::json::array();
  items.push_back({{"name", "laptop"}});
  EXPECT_EQ(RenderJson(items), "[\n  {\n    \"name\": \"laptop\"\n  }\n]\n");
  EXPECT_EQ(RenderJson(nlohmann::json::array()), "[]\n");
  std::ostringstream out;
  PrintJson(out, {{"a", 1}});
  EXPECT_EQ(out.str(), "{\n  \"a\": 1\n}\n");
}

TEST(JsonOutputTest, InvalidUtf8DoesNotThrow) {
  EXPECT_EQ(RenderJson("a\xff"), "\"a\xef\xbf\xbd\"\n");
}

}  // namespace
}  // namespace gpuwerk::cli
