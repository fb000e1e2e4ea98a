#include "core/time_format.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace gpuwerk::core {
namespace {

/// A proleptic Gregorian date.
struct CivilDate {
  int64_t year;
  unsigned month;  ///< 1…12
  unsigned day;    ///< 1…31
};

/// The date `days` after 1970-01-01: Howard Hinnant's civil_from_days ("chrono-Compatible
/// Low-Level Date Algorithms", public domain), in eras of 400 years (146,097 days) that start on
/// a March 1st, so the leap day ends a year.
constexpr CivilDate CivilFromDays(int64_t days) {
  const int64_t z = days + 719'468;  // days since 0000-03-01
  const int64_t era = (z >= 0 ? z : z - 146'096) / 146'097;
  const auto doe = static_cast<unsigned>(z - era * 146'097);                      // 0…146096
  const unsigned yoe = (doe - doe / 1'460 + doe / 36'524 - doe / 146'096) / 365;  // 0…399
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                   // 0…365
  const unsigned mp = (5 * doy + 2) / 153;  // 0…11, March = 0
  const unsigned day = doy - (153 * mp + 2) / 5 + 1;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<int64_t>(yoe) + era * 400 + (month <= 2 ? 1 : 0), month, day};
}

/// Writes `value` (0…99) as two digits at `out`.
void TwoDigits(char* out, unsigned value) {
  out[0] = static_cast<char>('0' + value / 10);
  out[1] = static_cast<char>('0' + value % 10);
}

}  // namespace

std::string FormatRfc3339(int64_t unix_seconds) {
  // Digits by hand from whole days (a hot path: every created_at of an API list; fmt's chrono
  // formatting also went through nanoseconds, which overflow after 2262), within years 1…9999.
  constexpr int64_t kFirst = -62'135'596'800;  // 0001-01-01T00:00:00Z
  constexpr int64_t kLast = 253'402'300'799;   // 9999-12-31T23:59:59Z
  constexpr int64_t kDay = 86'400;
  const int64_t t = std::clamp(unix_seconds, kFirst, kLast);
  int64_t days = t / kDay;
  int64_t second_of_day = t % kDay;
  if (second_of_day < 0) {  // before 1970: division truncates towards zero
    second_of_day += kDay;
    --days;
  }
  const CivilDate date = CivilFromDays(days);
  const auto year = static_cast<unsigned>(date.year);  // 1…9999
  const auto sod = static_cast<unsigned>(second_of_day);
  std::string out = "0000-00-00T00:00:00Z";
  TwoDigits(&out[0], year / 100);
  TwoDigits(&out[2], year % 100);
  TwoDigits(&out[5], date.month);
  TwoDigits(&out[8], date.day);
  TwoDigits(&out[11], sod / 3'600);
  TwoDigits(&out[14], sod / 60 % 60);
  TwoDigits(&out[17], sod % 60);
  return out;
}
std::optional<int64_t> ParseRfc3339(std::string_view text) {
  if (text.size() != 20 || text[19] != 'Z') return std::nullopt;
  int y, mo, d, h, mi, s;
  std::string buf(text);
  if (std::sscanf(buf.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ", &y, &mo, &d, &h, &mi, &s) != 6) {
    return std::nullopt;
  }
  using namespace std::chrono;
  year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return std::nullopt;
  auto tp = sys_days{ymd} + hours{h} + minutes{mi} + seconds{s};
  const int64_t unix_seconds = tp.time_since_epoch().count();
  if (unix_seconds < kEarliestAcceptedTime || unix_seconds > kLatestAcceptedTime) {
    return std::nullopt;
  }
  return unix_seconds;
}

}  // namespace gpuwerk::core
