#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>

namespace gpuwerk::core {

/// Configures the process-wide spdlog logger: one line per event on stderr,
/// `<RFC 3339 time> <level> [request_id=<id> ]<component>: <message> key=value…`. `level` is one of
/// trace, debug, info, warn, error. Call once from main before any thread starts.
void InitLogging(std::string_view level);

/// The formatter InitLogging installs (exposed for tests and other sinks).
std::unique_ptr<spdlog::formatter> MakeLogFormatter();

/// While alive, every log line this thread writes carries `request_id=<id>` (set by the HTTP
/// server around each handler, which runs on one thread). Nests; not copyable.
class ScopedRequestId {
 public:
  explicit ScopedRequestId(std::string_view id);
  ~ScopedRequestId();
  ScopedRequestId(const ScopedRequestId&) = delete;
  ScopedRequestId& operator=(const ScopedRequestId&) = delete;

 private:
  std::string previous_;
};

/// The request id of the current thread's request, "" outside one.
std::string_view CurrentRequestId();

/// Sodium must be initialised once per process before any crypto call; idempotent, thread-safe.
void InitCrypto();

}  // namespace gpuwerk::core
