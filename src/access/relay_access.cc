#include "access/relay_access.h"

#include <vector>

#include "keys/ssh_key_table.h"
#include "protocol/relay_routing.h"
#include "sched/instance_table.h"

namespace gpuwerk::access {

core::Result<protocol::RelayAuthorizeDecision> RelayAccess::Authorize(
    const protocol::RelayAuthorizeRequest& request) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<sched::InstanceRow>> {
        GPUWERK_ASSIGN_OR_RETURN(auto keys,
                                 keys::SshKeyTable::FindByFingerprint(tx, request.fingerprint));
        std::vector<std::string> key_ids;
        for (const auto& k : keys) key_ids.push_back(k.id);
        return sched::InstanceTable::ListRunningWithKeys(tx, key_ids);
      }));
  std::vector<protocol::RelayCandidate> reachable;
  for (const auto& row : rows) {
    auto in = instances_.Get(row.person_id, row.id);
    if (!in) {
      if (in.error().code == core::ErrorCode::kNotFound) continue;  // deleted meanwhile
      return std::unexpected(in.error());
    }
    reachable.push_back({.instance_id = in->id,
                         .name = in->name,
                         .hostname = in->hostname,
                         .person_id = row.person_id,
                         .upstream_host = in->ssh_address.empty() ? "127.0.0.1" : in->ssh_address,
                         .upstream_port = static_cast<uint16_t>(in->ssh_port)});
  }
  return protocol::DecideRelayLogin(request, std::move(reachable));
}

}  // namespace gpuwerk::access
