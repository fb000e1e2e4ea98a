#include "relay/in_memory_relay_authorizer.h"

#include <algorithm>

#include "protocol/relay_routing.h"
#include "relay/http_relay_authorizer.h"

namespace gpuwerk::relay {

void InMemoryRelayAuthorizer::Put(RelayInstance instance) {
  std::lock_guard lock(mu_);
  std::erase_if(instances_,
                [&](const RelayInstance& i) { return i.instance_id == instance.instance_id; });
  instances_.push_back(std::move(instance));
}

void InMemoryRelayAuthorizer::Remove(const std::string& instance_id) {
  std::lock_guard lock(mu_);
  std::erase_if(instances_, [&](const RelayInstance& i) { return i.instance_id == instance_id; });
}

core::Result<AuthorizeDecision> InMemoryRelayAuthorizer::Authorize(
    const AuthorizeRequest& request) {
  std::vector<protocol::RelayCandidate> reachable;
  {
    std::lock_guard lock(mu_);
    for (const auto& in : instances_) {
      if (!in.key_fingerprints.contains(request.key_fingerprint)) continue;
      reachable.push_back({.instance_id = in.instance_id,
                           .name = in.name,
                           .hostname = in.hostname,
                           .person_id = in.person_id,
                           .upstream_host = in.upstream_host,
                           .upstream_port = in.upstream_port});
    }
  }
  return FromWire(protocol::DecideRelayLogin(ToWire(request), std::move(reachable)));
}

}  // namespace gpuwerk::relay
