#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/encoding.h"
#include "core/error.h"
#include "core/host_address.h"
#include "core/keyset.h"
#include "core/logging.h"
#include "core/open_files.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/time_format.h"

namespace gpuwerk::core {
namespace {

TEST(UnsafeTextTest, RefusesControlsBidiAndLineSeparators) {
  for (char32_t cp : {0x00u, 0x09u, 0x0au, 0x1fu, 0x7fu, 0x80u, 0x85u, 0x9fu, 0x200bu, 0x200fu,
                      0x202au, 0x202eu, 0x2066u, 0x2069u, 0x2028u, 0x2029u}) {
    EXPECT_TRUE(IsUnsafeTextCodePoint(cp)) << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {0x20u, 0x7eu, 0xa0u, 0xe9u, 0x2010u, 0x2030u, 0x2070u, 0x1f600u}) {
    EXPECT_FALSE(IsUnsafeTextCodePoint(cp)) << static_cast<uint32_t>(cp);
  }
  EXPECT_FALSE(HasUnsafeText("caf\u00e9 \u2713 plain"));
  EXPECT_TRUE(HasUnsafeText("evil \u202e txet"));
  EXPECT_TRUE(HasUnsafeText("next\u0085line"));
  EXPECT_TRUE(HasUnsafeText("line\u2028sep"));
  EXPECT_TRUE(HasUnsafeText("tab\there"));
}

// A break test found key comments and GPU type descriptions keeping U+061C (a Bidi_Control
// character), U+FEFF, U+00AD, U+3164 and tag characters while other fields refused them: every
// Bidi_Control and every character that shows as nothing is refused alike, variation selectors
// (emoji) are not (issue 11, strict input).
TEST(UnsafeTextTest, EveryBidiControlAndInvisibleCharacterIsRefusedAlike) {
  for (char32_t cp :
       {0xadu, 0x61cu, 0x115fu, 0x1160u, 0x180eu, 0x200cu, 0x200du, 0x2060u, 0x2064u, 0x206au,
        0x206fu, 0x3164u, 0xfeffu, 0xffa0u, 0xfff9u, 0xfffbu, 0xe0001u, 0xe0041u, 0xe007fu}) {
    EXPECT_TRUE(IsUnsafeTextCodePoint(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {0x600u, 0x2065u, 0xfe0fu, 0xfffcu, 0xe0080u, 0xe0100u, 0x1f44du}) {
    EXPECT_FALSE(IsUnsafeTextCodePoint(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  EXPECT_TRUE(HasUnsafeText("com\u061cment"));
  EXPECT_TRUE(HasUnsafeText("soft\u00adhyphen"));
  EXPECT_FALSE(HasUnsafeText("thumbs \U0001f44d\ufe0f up"));
}

TEST(BoundedPrintableTest, EscapesControlsBidiQuotesAndBadBytes) {
  EXPECT_EQ(BoundedPrintable("alpha-k3x7q"), "alpha-k3x7q");
  EXPECT_EQ(BoundedPrintable("caf\u00e9 \u2713"), "caf\u00e9 \u2713");  // printable UTF-8 kept
  EXPECT_EQ(BoundedPrintable("evil\n2026-12-01T00:00:00.000Z critical relay: FORGED"),
            "evil\\n2026-12-01T00:00:00.000Z critical relay: FORGED");
  EXPECT_EQ(BoundedPrintable("esc\x1b[2J\x1b[31mRED"), "esc\\x1b[2J\\x1b[31mRED");
  EXPECT_EQ(BoundedPrintable("evil\u202etxt.exe"), "evil\\u{202e}txt.exe");
  EXPECT_EQ(BoundedPrintable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(BoundedPrintable("tab\tcr\r\x7f\u0085\u2028"), "tab\\tcr\\r\\x7f\\u{0085}\\u{2028}");
  // An escape in the input cannot pass for one the function wrote, nor end a quoted field.
  EXPECT_EQ(BoundedPrintable("a\\x1b\" b"), "a\\\\x1b\\\" b");
  // Bytes that are not well-formed UTF-8: a lone continuation byte, a truncated sequence, an
  // overlong '/', a surrogate.
  EXPECT_EQ(BoundedPrintable("\x80 \xe2\x80 \xc0\xaf \xed\xa0\x80"),
            "\\x80 \\xe2\\x80 \\xc0\\xaf \\xed\\xa0\\x80");
}

TEST(BoundedPrintableTest, CutsAtTheBoundAndSaysTheOriginalLength) {
  const std::string long_name(30'000, 'a');
  const std::string shown = BoundedPrintable(long_name);
  EXPECT_EQ(shown, std::string(kPrintableBytes, 'a') + "…[30000 bytes]");
  EXPECT_EQ(BoundedPrintable(std::string(kPrintableBytes, 'b')), std::string(kPrintableBytes, 'b'));
  // Never cuts inside an escape or a character: 4 + 3 bytes fit in 8, the next escape does not.
  EXPECT_EQ(BoundedPrintable("\x01\xe2\x9c\x93\x02", 8), "\\x01\u2713…[5 bytes]");
  // Escapes count towards the bound: a name of 30,000 ESC bytes stays as short.
  const std::string escs = BoundedPrintable(std::string(30'000, '\x1b'));
  EXPECT_LE(escs.size(), kPrintableBytes + 31);
  EXPECT_EQ(escs.find('\x1b'), std::string::npos);
  EXPECT_NE(escs.find("…[30000 bytes]"), std::string::npos);
}

// A relay's refusal report carries the user name escaped once, by the relay: the server keeps
// what is already in that form and escapes only what is not (docs/ssh.md "Outside text").
TEST(BoundedPrintableTest, IsBoundedPrintableAcceptsExactlyWhatItWrites) {
  for (const std::string& raw :
       {std::string("alpha-k3x7q"), std::string("esc\x1b[2J\x1b[31mRED"),
        std::string("evil\u202etxt.exe"), std::string("a\\x1b\" b\n"), std::string(30'000, 'q'),
        std::string(30'000, '\x1b'), std::string("\x80 \xe2\x80 caf\u00e9"), std::string()}) {
    const std::string once = BoundedPrintable(raw);
    EXPECT_TRUE(IsBoundedPrintable(once)) << once;
  }
  EXPECT_TRUE(IsBoundedPrintable("\\x01\u2713…[5 bytes]", 8));
  // Raw controls, direction marks, a bare quote, a lone or unknown escape, bad UTF-8, too long.
  for (const std::string& not_printable :
       {std::string("esc\x1b[31m"), std::string("rtl\u202e"), std::string("line\nbreak"),
        std::string("zero\u200bwidth"), std::string("say \"hi\""), std::string("trail\\"),
        std::string("\\q"), std::string("\\x1"), std::string("\\xAB"), std::string("\\u{20}"),
        std::string("\\u{202e"), std::string("\xc0\xaf"), std::string(257, 'a'),
        std::string(257, 'a') + "…[300 bytes]", std::string("…[x bytes]") + "\x1b"}) {
    EXPECT_FALSE(IsBoundedPrintable(not_printable)) << BoundedPrintable(not_printable);
  }
}

TEST(ReplaceUnsafeTextTest, ReplacesControlsDirectionMarksZeroWidthAndBadBytes) {
  EXPECT_EQ(ReplaceUnsafeText("caf\u00e9 \u2713 \U0001f44d\ufe0f", "?"),
            "caf\u00e9 \u2713 \U0001f44d\ufe0f");
  EXPECT_EQ(ReplaceUnsafeText("esc\x1b[31m\nx\t\x7f\u0085", "?"), "esc?[31m?x???");
  EXPECT_EQ(ReplaceUnsafeText("a\u202eb\u2066c\u2069d\u200ee\u200ff\u061cg", "?"), "a?b?c?d?e?f?g");
  EXPECT_EQ(ReplaceUnsafeText("zero\u200bwidth\u200d\u2060\ufeff", "?"), "zero?width???");
  EXPECT_EQ(ReplaceUnsafeText("\x9b\x80 \xc0\xaf", "?"), "?? ??");
}

// A token expiring in 9999 crashed the server (fmt formats time points through nanoseconds,
// which overflow after 2262): accepted times end in 2200, and any value formats.
TEST(TimeFormatTest, FarTimesAreRefusedOnInputAndFormatWithoutOverflow) {
  EXPECT_EQ(ParseRfc3339("2200-12-31T23:59:59Z"), kLatestAcceptedTime);
  EXPECT_EQ(ParseRfc3339("2201-01-01T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("9999-12-31T23:59:59Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("1969-12-31T23:59:59Z"), std::nullopt);
  EXPECT_EQ(FormatRfc3339(253'402'300'799), "9999-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(INT64_MAX), "9999-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(INT64_MIN), "0001-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-1), "1969-12-31T23:59:59Z");
}

TEST(TimeFormatTest, RoundTripsRfc3339) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(1'800'000'000), "2027-01-15T08:00:00Z");
  EXPECT_EQ(ParseRfc3339("2027-01-15T08:00:00Z"), 1'800'000'000);
  EXPECT_EQ(ParseRfc3339("2027-02-30T08:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseRfc3339("garbage"), std::nullopt);
}

TEST(TimeFormatTest, FormatsCalendarEdges) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");              // the epoch
  EXPECT_EQ(FormatRfc3339(951'782'400), "2000-02-29T00:00:00Z");    // a century that leaps
  EXPECT_EQ(FormatRfc3339(1'709'251'199), "2024-02-29T23:59:59Z");  // a leap day's last second
  EXPECT_EQ(FormatRfc3339(1'709'251'200), "2024-03-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(4'107'542'399), "2100-02-28T23:59:59Z");  // a century that does not
  EXPECT_EQ(FormatRfc3339(4'107'542'400), "2100-03-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(1'767'225'599), "2025-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(kLatestAcceptedTime), "2200-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(kLatestAcceptedTime + 1), "2201-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(253'402'300'800), "9999-12-31T23:59:59Z");  // clamped
  // Before 1970: the second of the day counts up from midnight.
  EXPECT_EQ(FormatRfc3339(-86'400), "1969-12-31T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-86'401), "1969-12-30T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(-2'208'988'800), "1900-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-11'670'998'400), "1600-02-29T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-62'135'596'800), "0001-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-62'135'596'801), "0001-01-01T00:00:00Z");  // clamped
}

// The digits by hand agree with std::chrono's calendar on every day of 1969 to 2201 and every 97th
// day of the rest of years 1 to 9999, each at a different second of the day.
TEST(TimeFormatTest, AgreesWithChronoCalendar) {
  using namespace std::chrono;
  auto expected = [](int64_t t) {
    const sys_seconds at{seconds(t)};
    const sys_days day = floor<days>(at);
    const year_month_day ymd{day};
    const hh_mm_ss hms{at - day};
    char text[32];
    std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()));
    return std::string(text);
  };
  const int64_t first_day = -719'162;  // 0001-01-01
  const int64_t last_day = 2'932'896;  // 9999-12-31
  int checked = 0;
  for (int64_t day = first_day; day <= last_day; ++day) {
    const bool near = day >= -365 && day <= 84'735;  // 1969-01-01 … 2201-12-31
    if (!near && (day - first_day) % 97 != 0) continue;
    const int64_t t = day * 86'400 + ((day * 7'919) % 86'400 + 86'400) % 86'400;
    ASSERT_EQ(FormatRfc3339(t), expected(t)) << t;
    ++checked;
  }
  EXPECT_GT(checked, 120'000);
}

TEST(EncodingTest, Base64AndSha256MatchKnownVectors) {
  InitCrypto();
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(Base64Decode("Zm9v!mE="), std::nullopt);
  EXPECT_EQ(HexEncode(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9"));
  EXPECT_FALSE(IsValidUtf8("caf\xe9"));
  EXPECT_FALSE(IsValidUtf8("\xff\xfe"));
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // a surrogate
}

TEST(RandomTest, TokensAre256BitsAndIdsArePrefixed) {
  InitCrypto();
  SodiumRng rng;
  auto t = RandomToken(rng);
  EXPECT_EQ(t.size(), 43u);
  EXPECT_NE(t, RandomToken(rng));
  auto id = NewId(rng, "key");
  EXPECT_EQ(id.rfind("key_", 0), 0u);
  EXPECT_EQ(id.size(), 20u);
}

TEST(LoggingTest, LinesInsideARequestCarryItsId) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(MakeLogFormatter());
  logger.info("outside");
  {
    ScopedRequestId scope("abc123");
    EXPECT_EQ(CurrentRequestId(), "abc123");
    logger.info("inside");
  }
  logger.info("after");
  const std::string text = out.str();
  EXPECT_NE(text.find("info request_id=abc123 inside"), std::string::npos) << text;
  EXPECT_NE(text.find("info outside"), std::string::npos) << text;
  EXPECT_NE(text.find("info after"), std::string::npos) << text;
  EXPECT_EQ(CurrentRequestId(), "");
}

TEST(ErrorTest, TryPropagates) {
  auto inner = []() -> Result<int> { return NotFound("thing"); };
  auto outer = [&]() -> Result<int> {
    GPUWERK_ASSIGN_OR_RETURN(int v, inner());
    return v + 1;
  };
  auto r = outer();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "not_found");
}

// Issue 12: what a host's agent reports as its ssh_address goes into commands people run;
// only a plain address or name may.
TEST(HostAddressTest, AcceptsIpLiteralsAndDnsNamesOnly) {
  for (const char* ok : {"127.0.0.1", "10.0.0.5", "::1", "fe80::1", "2001:db8::5", "spark-07",
                         "spark-07.rack2.example.com", "example.com.", "a", "0.example"}) {
    EXPECT_TRUE(IsHostAddress(ok)) << ok;
  }
  for (const char* bad :
       {"", "-oProxyCommand=touch /tmp/x", "-p", "10.0.0.5 -oProxyCommand=x", "host name",
        "root@10.0.0.5", "[::1]", "10.0.0.5:22", "a/b", "bad-.example", "-bad.example", "two..dots",
        "tab\there", "new\nline", "\x1b[31m", "spark_07"}) {
    EXPECT_FALSE(IsHostAddress(bad)) << bad;
  }
  EXPECT_FALSE(IsHostAddress(std::string(64, 'a') + ".example"));  // a label over 63
  EXPECT_FALSE(IsHostAddress(std::string(254, 'a')));
}

// Issue 12 finding 8 (a flood made accept() fail with EMFILE): the HTTP cap's default leaves a
// quarter of the descriptors, at least 128, to everything else.
TEST(OpenFileLimitTest, DefaultCapLeavesAQuarterAndAtLeast128Spare) {
  EXPECT_EQ(DefaultMaxConnections(1024), 768u);
  EXPECT_EQ(DefaultMaxConnections(65536), 49152u);
  EXPECT_EQ(DefaultMaxConnections(1048576), 786432u);
  EXPECT_EQ(DefaultMaxConnections(400), 272u);  // 128 spare, more than a quarter
  EXPECT_EQ(DefaultMaxConnections(257), 129u);
  EXPECT_EQ(DefaultMaxConnections(256), 128u);
  EXPECT_EQ(DefaultMaxConnections(100), 50u);
  EXPECT_EQ(DefaultMaxConnections(1), 1u);
  EXPECT_EQ(DefaultMaxConnections(UINT64_MAX), 786432u);
  for (uint64_t limit = 2; limit < 5000; ++limit) {
    EXPECT_LT(DefaultMaxConnections(limit), limit);
    EXPECT_LE(DefaultMaxConnections(limit - 1), DefaultMaxConnections(limit)) << limit;
  }
}

TEST(OpenFileLimitTest, RaiseSetsTheSoftLimitToTheHardLimit) {
  rlimit original{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &original), 0);
  if (original.rlim_max != RLIM_INFINITY && original.rlim_max < 512) {
    GTEST_SKIP() << "hard limit " << original.rlim_max << " too low to test";
  }
  rlimit lowered = original;
  lowered.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  auto raised = RaiseOpenFileLimit();
  ASSERT_TRUE(raised) << raised.error().message;
  EXPECT_EQ(raised->soft_before, 256u);
  EXPECT_GT(raised->soft, 256u);
  if (original.rlim_max != RLIM_INFINITY) {
    EXPECT_EQ(raised->hard, static_cast<uint64_t>(original.rlim_max));
    EXPECT_LE(raised->soft, raised->hard);
  }
  EXPECT_EQ(OpenFileSoftLimit(), raised->soft);
  // Again: nothing to raise, nothing lowered.
  auto again = RaiseOpenFileLimit();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->soft_before, raised->soft);
  EXPECT_EQ(again->soft, raised->soft);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &original), 0);
}

TEST(KeysetTest, CursorsRoundTripAndAnythingElseIsInvalidCursor) {
  const KeysetKey key{.at = 1764720000, .id = "ins_abc123"};
  EXPECT_EQ(FormatKeyset(key), "1764720000.ins_abc123");
  auto parsed = ParseKeyset(FormatKeyset(key));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(*parsed, key);
  for (const char* bad : {"", ".", "12", "12.", ".ins_a", "-1.ins_a", "1x.ins_a", "1.INS", "1.a b",
                          "1.a-b", "99999999999999999999.a"}) {
    auto r = ParseKeyset(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_cursor") << bad;
  }
  EXPECT_FALSE(ParseKeyset("1." + std::string(65, 'a')));
  auto both = ParseKeysetQuery("1.a", "2.b");
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error().api_code, "invalid_cursor");
  auto before = ParseKeysetQuery("1.a", "");
  ASSERT_TRUE(before);
  EXPECT_TRUE(before->before.has_value());
  EXPECT_FALSE(before->after.has_value());
  auto none = ParseKeysetQuery("", "");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->before || none->after);
}

}  // namespace
}  // namespace gpuwerk::core
