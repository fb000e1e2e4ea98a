#include "billing/money.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "core/time_format.h"

namespace gpuwerk::billing {
namespace {

int64_t At(const char* rfc3339) { return core::ParseRfc3339(rfc3339).value(); }

std::vector<MonthMinutes> Split(int64_t from, int64_t to) {
  const std::vector<Segment> one{{from, to}};
  return SplitByMonth(from, one);
}

int64_t Total(const std::vector<MonthMinutes>& months) {
  int64_t total = 0;
  for (const auto& m : months) total += m.minutes;
  return total;
}

TEST(MinutesTest, CeilOfSecondsOverSixtyAtLeastOne) {
  EXPECT_EQ(BilledMinutes(0), 1);
  EXPECT_EQ(BilledMinutes(-5), 1);
  EXPECT_EQ(BilledMinutes(1), 1);
  EXPECT_EQ(BilledMinutes(59), 1);
  EXPECT_EQ(BilledMinutes(60), 1);
  EXPECT_EQ(BilledMinutes(61), 2);
  EXPECT_EQ(BilledMinutes(120), 2);
  EXPECT_EQ(BilledMinutes(121), 3);
  EXPECT_EQ(BilledMinutes(86400), 1440);
}

TEST(MinutesTest, OneSecondSixtyAndSixtyOneInOneMonth) {
  const int64_t t = At("2026-11-10T10:00:00Z");
  const int64_t nov = At("2026-11-01T00:00:00Z");
  EXPECT_EQ(Split(t, t + 1), (std::vector<MonthMinutes>{{nov, 1}}));
  EXPECT_EQ(Split(t, t + 60), (std::vector<MonthMinutes>{{nov, 1}}));
  EXPECT_EQ(Split(t, t + 61), (std::vector<MonthMinutes>{{nov, 2}}));
  // Nothing billed at all: the minimum minute, in the month the session started.
  EXPECT_EQ(Split(t, t), (std::vector<MonthMinutes>{{nov, 1}}));
  EXPECT_EQ(SplitByMonth(t, {}), (std::vector<MonthMinutes>{{nov, 1}}));
}

TEST(MinutesTest, EachMinuteBelongsToTheMonthInWhichItBegins) {
  const int64_t nov = At("2026-11-01T00:00:00Z");
  const int64_t dec = At("2026-12-01T00:00:00Z");
  // 23:59:30 → 00:00:30: 60 s, one minute, which begins in November.
  EXPECT_EQ(Split(dec - 30, dec + 30), (std::vector<MonthMinutes>{{nov, 1}}));
  // 23:59:30 → 00:00:31: two minutes; the second begins at 00:00:30, in December.
  EXPECT_EQ(Split(dec - 30, dec + 31), (std::vector<MonthMinutes>{{nov, 1}, {dec, 1}}));
  // Starting exactly at the boundary: all in December.
  EXPECT_EQ(Split(dec, dec + 61), (std::vector<MonthMinutes>{{dec, 2}}));
  // Ending exactly at the boundary: all in November.
  EXPECT_EQ(Split(dec - 120, dec), (std::vector<MonthMinutes>{{nov, 2}}));
  // A minute that begins at 23:59:59.
  EXPECT_EQ(Split(dec - 61, dec + 1), (std::vector<MonthMinutes>{{nov, 2}}));
}

TEST(MinutesTest, AcrossTwoMonthBoundariesTheTotalIsCeilOfTheSeconds) {
  const int64_t nov = At("2026-11-01T00:00:00Z");
  const int64_t dec = At("2026-12-01T00:00:00Z");
  const int64_t jan = At("2027-01-01T00:00:00Z");
  const int64_t from = At("2026-11-30T23:00:10Z");
  const int64_t to = At("2027-01-01T00:30:05Z");
  const auto months = Split(from, to);
  ASSERT_EQ(months.size(), 3u);
  EXPECT_EQ(months[0].month_start, nov);
  EXPECT_EQ(months[1].month_start, dec);
  EXPECT_EQ(months[2].month_start, jan);
  // November: minutes begin at 23:00:10, 23:01:10 … 23:59:10: 60.
  EXPECT_EQ(months[0].minutes, 60);
  // December: 00:00:10 … 23:59:10 of 31 days.
  EXPECT_EQ(months[1].minutes, 31 * 24 * 60);
  EXPECT_EQ(Total(months), BilledMinutes(to - from));
  for (const auto& m : months) EXPECT_GE(m.minutes, 0);
}

TEST(MinutesTest, SplitNeverBillsMoreThanTheCeilingForAnyLengthOrOffset) {
  const int64_t dec = At("2026-12-01T00:00:00Z");
  for (int64_t start = dec - 200; start <= dec + 5; start += 7) {
    for (int64_t len = 0; len <= 400; len += 13) {
      EXPECT_EQ(Total(Split(start, start + len)), BilledMinutes(len)) << start << " " << len;
    }
  }
}

TEST(MinutesTest, GapsAreNotBilledAndMinutesCountAlongBilledTime) {
  const int64_t nov = At("2026-11-01T00:00:00Z");
  const int64_t dec = At("2026-12-01T00:00:00Z");
  // 30 s before the boundary, an unbilled gap over it, 40 s after: 70 s billed, 2 minutes; the
  // second minute begins 30 s into the second segment, in December.
  const std::vector<Segment> segments{{dec - 60, dec - 30}, {dec + 100, dec + 140}};
  EXPECT_EQ(SplitByMonth(dec - 60, segments), (std::vector<MonthMinutes>{{nov, 1}, {dec, 1}}));
}

TEST(MoneyTest, ExponentsComeFromTheIso4217Table) {
  EXPECT_EQ(CurrencyExponent("JPY"), 0);
  EXPECT_EQ(CurrencyExponent("jpy"), 0);
  EXPECT_EQ(CurrencyExponent("KRW"), 0);
  EXPECT_EQ(CurrencyExponent("usd"), 2);
  EXPECT_EQ(CurrencyExponent("EUR"), 2);
  EXPECT_EQ(CurrencyExponent("KWD"), 3);
  EXPECT_EQ(CurrencyExponent("BHD"), 3);
  EXPECT_EQ(CurrencyExponent("CLF"), 4);
  EXPECT_EQ(CurrencyExponent("XYZ"), std::nullopt);
  EXPECT_EQ(CurrencyExponent("US"), std::nullopt);
}

TEST(MoneyTest, LineAmountRoundsOnceHalfUp) {
  // 65 minor/hour for 1 minute: 65/60 = 1.083 → 1.
  EXPECT_EQ(LineAmountMinor(65, 1), 1);
  // 90/hour for 1 minute: 1.5 → 2 (half up).
  EXPECT_EQ(LineAmountMinor(90, 1), 2);
  // 89/hour: 1.483 → 1.
  EXPECT_EQ(LineAmountMinor(89, 1), 1);
  EXPECT_EQ(LineAmountMinor(150, 61), 153);  // 152.5 → 153
  EXPECT_EQ(LineAmountMinor(0, 100), 0);
  EXPECT_EQ(LineAmountMinor(-5, 100), 0);
  // Rounding once per line, not per minute: 61 × round(65/60) would be 61.
  EXPECT_EQ(LineAmountMinor(65, 61), 66);  // 66.08
  EXPECT_EQ(LineAmountMinor(INT64_MAX, INT64_MAX), INT64_MAX);
}

TEST(MoneyTest, TheSameMinutesInJpyUsdAndKwdUseEachCurrencysExponent) {
  // 250 JPY, 2.50 USD and 2.500 KWD an hour, 61 minutes each: minor units × 61 / 60.
  EXPECT_EQ(FormatAmount(LineAmountMinor(250, 61), "jpy"), "254 JPY");     // 254.17
  EXPECT_EQ(FormatAmount(LineAmountMinor(250, 61), "usd"), "2.54 USD");    // 254.17 cents
  EXPECT_EQ(FormatAmount(LineAmountMinor(2500, 61), "kwd"), "2.542 KWD");  // 2541.67 fils
  EXPECT_EQ(FormatAmount(5, "usd"), "0.05 USD");
  EXPECT_EQ(FormatAmount(5, "kwd"), "0.005 KWD");
  EXPECT_EQ(FormatAmount(-1234, "EUR"), "-12.34 EUR");
  EXPECT_EQ(FormatAmount(7, "xyz"), "7 (minor units) XYZ");
}

TEST(MonthTest, MonthsAreUtcCalendarMonths) {
  EXPECT_EQ(MonthStart(At("2026-11-30T23:59:59Z")), At("2026-11-01T00:00:00Z"));
  EXPECT_EQ(NextMonthStart(At("2026-12-15T00:00:00Z")), At("2027-01-01T00:00:00Z"));
  EXPECT_EQ(NextMonthStart(At("2028-02-10T00:00:00Z")), At("2028-03-01T00:00:00Z"));
  EXPECT_EQ(MonthLabel(At("2027-01-01T00:00:00Z")), "2027-01");
  EXPECT_EQ(ParseMonth("2026-11").value(), At("2026-11-01T00:00:00Z"));
  for (const char* bad : {"2026-13", "2026-00", "26-11", "2026/11", "2026-1x", "", "1969-12"}) {
    auto r = ParseMonth(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_month");
  }
}

TEST(MonthTest, EngineTimesWithFractionsParseAndNeverDoesNot) {
  EXPECT_EQ(ParseEngineTime("2026-01-02T03:04:05.123456789Z"), At("2026-01-02T03:04:05Z"));
  EXPECT_EQ(ParseEngineTime("2026-01-02T03:04:05Z"), At("2026-01-02T03:04:05Z"));
  EXPECT_EQ(ParseEngineTime("2026-01-02T03:04:05+00:00"), At("2026-01-02T03:04:05Z"));
  EXPECT_EQ(ParseEngineTime("0001-01-01T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParseEngineTime("2026-01-02T03:04:05+02:00"), std::nullopt);
  EXPECT_EQ(ParseEngineTime("garbage"), std::nullopt);
}

TEST(DaysTest, DayStartAtAFixedOffset) {
  const int64_t t = At("2027-01-15T22:30:00Z");
  EXPECT_EQ(DayStart(t, 0), At("2027-01-15T00:00:00Z"));
  // UTC+02:00: 00:30 on the 16th there; the day began at 22:00 UTC.
  EXPECT_EQ(DayStart(t, 7200), At("2027-01-15T22:00:00Z"));
  // UTC-05:00: 17:30 on the 15th there; the day began at 05:00 UTC.
  EXPECT_EQ(DayStart(t, -18000), At("2027-01-15T05:00:00Z"));
  // India's +05:30 and a time before 1970 (floor, not truncation).
  EXPECT_EQ(DayStart(t, 19800), At("2027-01-15T18:30:00Z"));
  EXPECT_EQ(DayStart(-1, 0), -86400);
  EXPECT_EQ(DayStart(At("2027-01-15T00:00:00Z"), 0), At("2027-01-15T00:00:00Z"));
}

TEST(DaysTest, EachMinuteBelongsToTheDayInWhichItBeginsAtTheOffset) {
  const int64_t midnight_east = At("2027-01-15T22:00:00Z");  // 00:00 at UTC+02:00
  const int64_t day15 = At("2027-01-14T22:00:00Z");
  const std::vector<Segment> one{{midnight_east - 30, midnight_east + 31}};
  // 23:59:30 → 00:00:31 there: two minutes, the second begins at 00:00:30, the next day.
  EXPECT_EQ(SplitByDay(one[0].from, one, 7200),
            (std::vector<DayMinutes>{{day15, 1}, {midnight_east, 1}}));
  // The same time at UTC: one day.
  EXPECT_EQ(SplitByDay(one[0].from, one, 0),
            (std::vector<DayMinutes>{{At("2027-01-15T00:00:00Z"), 2}}));
  // Three days with a gap; minutes add up to BilledMinutes of the billed seconds.
  const std::vector<Segment> gapped{{midnight_east - 3600, midnight_east + 100},
                                    {midnight_east + 86400 + 10, midnight_east + 86400 + 3000}};
  const auto days = SplitByDay(gapped[0].from, gapped, 7200);
  int64_t total = 0;
  for (const auto& d : days) total += d.minutes;
  EXPECT_EQ(total, BilledMinutes(3700 + 2990));
  ASSERT_EQ(days.size(), 3u);
  EXPECT_EQ(days[0], (DayMinutes{day15, 60}));
  EXPECT_EQ(days[2].day_start, midnight_east + 86400);
  // Nothing billed: the one minute on the day the session started.
  EXPECT_EQ(SplitByDay(midnight_east + 5, {}, 7200), (std::vector<DayMinutes>{{midnight_east, 1}}));
  // Months are unchanged by the shared walk.
  EXPECT_EQ(Total(SplitByMonth(gapped[0].from, gapped)), total);
}

TEST(DaysTest, AmountOfPriceMinutesRoundsOnceHalfUp) {
  EXPECT_EQ(AmountOfPriceMinutes(65 * 10), 11);            // 10.83
  EXPECT_EQ(AmountOfPriceMinutes(65 * 10 + 65 * 10), 22);  // 21.67, once, not 11 + 11
  EXPECT_EQ(AmountOfPriceMinutes(90), 2);                  // 1.5 → 2
  EXPECT_EQ(AmountOfPriceMinutes(89), 1);
  EXPECT_EQ(AmountOfPriceMinutes(0), 0);
  EXPECT_EQ(AmountOfPriceMinutes(-100), 0);
  EXPECT_EQ(AmountOfPriceMinutes(std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max() / 60);
}

}  // namespace
}  // namespace gpuwerk::billing
