#include "core/logging.h"

#include <sodium.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <memory>

#include "core/check.h"

namespace gpuwerk::core {
namespace {

thread_local std::string current_request_id;

/// The `%*` pattern flag: "request_id=<id> " inside a request, nothing outside.
class RequestIdFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    if (current_request_id.empty()) return;
    static constexpr std::string_view kKey = "request_id=";
    dest.append(kKey.data(), kKey.data() + kKey.size());
    dest.append(current_request_id.data(), current_request_id.data() + current_request_id.size());
    dest.push_back(' ');
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<RequestIdFlag>();
  }
};

}  // namespace

ScopedRequestId::ScopedRequestId(std::string_view id) : previous_(current_request_id) {
  current_request_id = id;
}
ScopedRequestId::~ScopedRequestId() { current_request_id = std::move(previous_); }
std::string_view CurrentRequestId() { return current_request_id; }

std::unique_ptr<spdlog::formatter> MakeLogFormatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<RequestIdFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %*%v");
  return formatter;
}

void InitLogging(std::string_view level) {
  auto logger = spdlog::stderr_logger_mt("gpuwerk");
  logger->set_formatter(MakeLogFormatter());
  logger->set_level(spdlog::level::from_str(std::string(level)));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void InitCrypto() { GPUWERK_CHECK(sodium_init() >= 0); }

}  // namespace gpuwerk::core
