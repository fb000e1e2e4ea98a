#include "billing/money.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iterator>
#include <limits>
#include <utility>

#include "core/time_format.h"

namespace gpuwerk::billing {
namespace {

int64_t Clamp0(int64_t v) { return v < 0 ? 0 : v; }

/// Multiples of 60 in [lo, hi) for 0 ≤ lo ≤ hi.
int64_t MinuteStartsIn(int64_t lo, int64_t hi) {
  auto ceil60 = [](int64_t v) { return (v + 59) / 60; };
  return hi <= lo ? 0 : ceil60(hi) - ceil60(lo);
}

std::chrono::sys_days DayOf(int64_t unix_seconds) {
  return std::chrono::floor<std::chrono::days>(
      std::chrono::sys_seconds(std::chrono::seconds(unix_seconds)));
}

int64_t Unix(std::chrono::year_month_day ymd) {
  return std::chrono::sys_seconds(std::chrono::sys_days(ymd)).time_since_epoch().count();
}

}  // namespace

int64_t BilledMinutes(int64_t seconds) {
  seconds = Clamp0(seconds);
  return std::max<int64_t>(1, seconds / 60 + (seconds % 60 != 0 ? 1 : 0));
}

int64_t LineAmountMinor(int64_t price_minor_per_hour, int64_t minutes) {
  // price·minutes/60 rounded half up, i.e. floor((price·minutes + 30) / 60), without a wider
  // type: with price = 60q + r and minutes = 60a + b it is q·minutes + r·a + floor((r·b + 30) /
  // 60).
  const int64_t price = Clamp0(price_minor_per_hour), m = Clamp0(minutes);
  const int64_t q = price / 60, r = price % 60, a = m / 60, b = m % 60;
  int64_t qm = 0, ra = 0, sum = 0;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (__builtin_mul_overflow(q, m, &qm) || __builtin_mul_overflow(r, a, &ra) ||
      __builtin_add_overflow(qm, ra, &sum) ||
      __builtin_add_overflow(sum, (r * b + 30) / 60, &sum)) {
    return kMax;
  }
  return sum;
}

int64_t MonthStart(int64_t unix_seconds) {
  const std::chrono::year_month_day ymd(DayOf(unix_seconds));
  return Unix(ymd.year() / ymd.month() / 1);
}

int64_t NextMonthStart(int64_t unix_seconds) {
  const std::chrono::year_month_day ymd(DayOf(unix_seconds));
  const auto next = std::chrono::year_month(ymd.year() / ymd.month()) + std::chrono::months(1);
  return Unix(next / 1);
}

std::string MonthLabel(int64_t unix_seconds) {
  const std::chrono::year_month_day ymd(DayOf(unix_seconds));
  char out[16];
  std::snprintf(out, sizeof out, "%04d-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()));
  return out;
}

core::Result<int64_t> ParseMonth(std::string_view label) {
  auto bad = [] {
    return core::Fail(core::ErrorCode::kInvalidArgument, "invalid_month",
                      "A month is written YYYY-MM, e.g. 2026-11 (UTC).");
  };
  if (label.size() != 7 || label[4] != '-') return bad();
  int year = 0, month = 0;
  for (size_t i = 0; i < 7; ++i) {
    if (i == 4) continue;
    if (!std::isdigit(static_cast<unsigned char>(label[i]))) return bad();
    (i < 4 ? year : month) = (i < 4 ? year : month) * 10 + (label[i] - '0');
  }
  if (year < 1970 || month < 1 || month > 12) return bad();
  return Unix(std::chrono::year(year) / std::chrono::month(static_cast<unsigned>(month)) / 1);
}

namespace {

/// Minutes along `segments` into periods (SplitByMonth's rule): `start_of(t)` is the first second
/// of the period holding t, `next_of(t)` the first second of the one after. Pairs of (period
/// start, minutes), in period order, periods with no minute left out.
template <class StartOf, class NextOf>
std::vector<std::pair<int64_t, int64_t>> SplitByPeriod(int64_t session_start,
                                                       std::span<const Segment> segments,
                                                       StartOf start_of, NextOf next_of) {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto add = [&](int64_t period, int64_t minutes) {
    if (minutes <= 0) return;
    if (!out.empty() && out.back().first == period) {
      out.back().second += minutes;
    } else {
      out.emplace_back(period, minutes);
    }
  };
  int64_t billed = 0;  // billed seconds before the segment at hand
  for (const Segment& s : segments) {
    if (s.to <= s.from) continue;
    // Minute k begins in this segment when 60·k lies in [billed, billed + length); walk the
    // periods the segment touches and count the minute starts whose wall time falls in each.
    for (int64_t from = s.from; from < s.to;) {
      const int64_t to = std::min(s.to, next_of(from));
      add(start_of(from), MinuteStartsIn(billed + (from - s.from), billed + (to - s.from)));
      from = to;
    }
    billed += s.to - s.from;
  }
  if (billed == 0) add(start_of(session_start), 1);
  return out;
}

/// floor(a / b) for b > 0, also for negative a.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && (a < 0) ? 1 : 0); }

}  // namespace

std::vector<MonthMinutes> SplitByMonth(int64_t session_start, std::span<const Segment> segments) {
  std::vector<MonthMinutes> out;
  for (auto [month, minutes] : SplitByPeriod(session_start, segments, MonthStart, NextMonthStart)) {
    out.push_back({.month_start = month, .minutes = minutes});
  }
  return out;
}

int64_t DayStart(int64_t unix_seconds, int64_t utc_offset_seconds) {
  constexpr int64_t kDay = 86400;
  return FloorDiv(unix_seconds + utc_offset_seconds, kDay) * kDay - utc_offset_seconds;
}

std::vector<DayMinutes> SplitByDay(int64_t session_start, std::span<const Segment> segments,
                                   int64_t utc_offset_seconds) {
  auto start_of = [&](int64_t t) { return DayStart(t, utc_offset_seconds); };
  auto next_of = [&](int64_t t) { return DayStart(t, utc_offset_seconds) + 86400; };
  std::vector<DayMinutes> out;
  for (auto [day, minutes] : SplitByPeriod(session_start, segments, start_of, next_of)) {
    out.push_back({.day_start = day, .minutes = minutes});
  }
  return out;
}

int64_t AmountOfPriceMinutes(int64_t price_minutes) {
  if (price_minutes <= 0) return 0;
  if (price_minutes > std::numeric_limits<int64_t>::max() - 30) {
    return std::numeric_limits<int64_t>::max() / 60;
  }
  return (price_minutes + 30) / 60;
}

std::optional<int64_t> ParseEngineTime(std::string_view text) {
  constexpr size_t kSeconds = 19;  // "YYYY-MM-DDTHH:MM:SS"
  if (text.size() < kSeconds + 1 || text.starts_with("0001-")) return std::nullopt;
  std::string_view rest = text.substr(kSeconds);
  if (rest.starts_with(".")) {
    size_t i = 1;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
    if (i == 1) return std::nullopt;
    rest.remove_prefix(i);
  }
  if (rest != "Z" && rest != "+00:00") return std::nullopt;
  return core::ParseRfc3339(std::string(text.substr(0, kSeconds)) + "Z");
}

}  // namespace gpuwerk::billing
