#include "core/time_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace gpuwerk::core {

std::string FormatRfc3339(int64_t unix_seconds) {
  using namespace std::chrono;
  // fmt's chrono formatting goes through nanoseconds, which overflow after 2262: computed by
  // hand from whole days instead, within years 1…9999.
  constexpr int64_t kFirst = -62'135'596'800;  // 0001-01-01T00:00:00Z
  constexpr int64_t kLast = 253'402'300'799;   // 9999-12-31T23:59:59Z
  const sys_seconds t{seconds(std::clamp(unix_seconds, kFirst, kLast))};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{t - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                     hms.hours().count(), hms.minutes().count(), hms.seconds().count());
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
