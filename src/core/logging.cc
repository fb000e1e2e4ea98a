#include "core/logging.h"

#include <sodium.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <memory>

#include "core/check.h"

namespace gpuwerk::core {

void InitLogging(std::string_view level) {
  auto logger = spdlog::stderr_logger_mt("gpuwerk");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void InitCrypto() { GPUWERK_CHECK(sodium_init() >= 0); }

}  // namespace gpuwerk::core
