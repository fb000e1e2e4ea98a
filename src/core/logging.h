#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace gpuwerk::core {

/// Configures the process-wide spdlog logger: one line per event on stderr,
/// `<RFC 3339 time> <level> <component>: <message> key=value…`. `level` is one of trace, debug,
/// info, warn, error. Call once from main before any thread starts.
void InitLogging(std::string_view level);

/// Sodium must be initialised once per process before any crypto call; idempotent, thread-safe.
void InitCrypto();

}  // namespace gpuwerk::core
