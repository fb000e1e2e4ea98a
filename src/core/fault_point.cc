#include "core/fault_point.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace gpuwerk::core {
namespace {

std::vector<std::string> ParsePoints() {
  std::vector<std::string> out;
  const char* env = std::getenv("GPUWERK_FAULT_POINTS");
  if (env == nullptr) return out;
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

void FaultPoint(std::string_view name) {
  static const std::vector<std::string> points = ParsePoints();
  if (points.empty()) return;
  for (const auto& p : points) {
    if (p == name) {
      spdlog::critical("fault point {} reached: killing this process (GPUWERK_FAULT_POINTS)", name);
      spdlog::default_logger()->flush();
      ::raise(SIGKILL);
    }
  }
}

}  // namespace gpuwerk::core
