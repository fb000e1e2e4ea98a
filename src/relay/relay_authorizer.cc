#include "relay/relay_authorizer.h"

namespace gpuwerk::relay {

core::Result<std::vector<RecheckVerdict>> RelayAuthorizer::Recheck(
    const std::vector<RecheckItem>& items) {
  std::vector<RecheckVerdict> verdicts;
  verdicts.reserve(items.size());
  for (const auto& item : items) {
    GPUWERK_ASSIGN_OR_RETURN(AuthorizeDecision d, Authorize(item.request));
    const bool same =
        d.target && d.target->instance_id == item.instance_id && d.target->login == item.login;
    verdicts.push_back({.allowed = same, .message = {}});
  }
  return verdicts;
}

}  // namespace gpuwerk::relay
