#include "core/time_format.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>

namespace gpuwerk::core {

std::string FormatRfc3339(int64_t unix_seconds) {
  std::chrono::sys_seconds t{std::chrono::seconds(unix_seconds)};
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", t);
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
  return tp.time_since_epoch().count();
}

}  // namespace gpuwerk::core
