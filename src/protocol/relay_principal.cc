#include "protocol/relay_principal.h"

namespace gpuwerk::protocol {

std::optional<std::string> RelayInstancePrincipal(std::string_view instance_id) {
  if (instance_id.empty() || instance_id.size() > kMaxPrincipalInstanceId) return std::nullopt;
  for (char c : instance_id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return std::nullopt;
  }
  return std::string(kRelayInstancePrincipalPrefix) + std::string(instance_id);
}

}  // namespace gpuwerk::protocol
