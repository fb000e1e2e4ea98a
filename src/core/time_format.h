#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuwerk::core {

/// Formats Unix seconds as an RFC 3339 UTC timestamp, e.g. "2026-11-30T02:44:17Z".
std::string FormatRfc3339(int64_t unix_seconds);

/// Parses "YYYY-MM-DDTHH:MM:SSZ" (RFC 3339, UTC, no fraction) into Unix seconds.
std::optional<int64_t> ParseRfc3339(std::string_view text);

}  // namespace gpuwerk::core
