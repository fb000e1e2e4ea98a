#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuwerk::core {

/// The times gpuwerk takes from outside (ParseRfc3339): 1970-01-01T00:00:00Z to
/// 2200-12-31T23:59:59Z, in Unix seconds. Far inside what std::chrono::system_clock (nanoseconds
/// in 64 bits: up to 2262-04-11) can hold, so no accepted time overflows a conversion.
inline constexpr int64_t kEarliestAcceptedTime = 0;
inline constexpr int64_t kLatestAcceptedTime = 7'289'654'399;

/// Formats Unix seconds as an RFC 3339 UTC timestamp, e.g. "2026-11-30T02:44:17Z". Any value
/// formats without overflow; before year 1 or after year 9999 it is clamped to those years'
/// ends.
std::string FormatRfc3339(int64_t unix_seconds);

/// Parses "YYYY-MM-DDTHH:MM:SSZ" (RFC 3339, UTC, no fraction) into Unix seconds; nullopt when
/// malformed or outside kEarliestAcceptedTime … kLatestAcceptedTime.
std::optional<int64_t> ParseRfc3339(std::string_view text);

}  // namespace gpuwerk::core
