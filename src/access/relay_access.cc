#include "access/relay_access.h"

#include <vector>

#include "keys/ssh_key_table.h"
#include "protocol/relay_routing.h"
#include "sched/instance_table.h"

namespace gpuwerk::access {

core::Result<protocol::RelayAuthorizeDecision> RelayAccess::Authorize(
    const protocol::RelayAuthorizeRequest& request) {
  // The person who authenticated is the offered key's owner (a key belongs to one account at
  // most); only that person's live instances with that key are candidates, and each relay
  // session is theirs.
  std::string person_id;
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<sched::InstanceRow>> {
        GPUWERK_ASSIGN_OR_RETURN(auto key,
                                 keys::SshKeyTable::FindByFingerprint(tx, request.fingerprint));
        if (!key) return std::vector<sched::InstanceRow>();
        person_id = key->person_id;
        return sched::InstanceTable::ListRunningWithKeys(tx, {key->id});
      }));
  std::vector<protocol::RelayCandidate> reachable;
  for (const auto& row : rows) {
    if (row.person_id != person_id) continue;  // an instance holds only its owner's keys
    auto in = instances_.Get(row.person_id, row.id);
    if (!in) {
      if (in.error().code == core::ErrorCode::kNotFound) continue;  // deleted meanwhile
      return std::unexpected(in.error());
    }
    reachable.push_back({.instance_id = in->id,
                         .name = in->name,
                         .hostname = in->hostname,
                         .person_id = person_id,
                         .upstream_host = in->ssh_address.empty() ? "127.0.0.1" : in->ssh_address,
                         .upstream_port = static_cast<uint16_t>(in->ssh_port)});
  }
  return protocol::DecideRelayLogin(request, std::move(reachable));
}

}  // namespace gpuwerk::access
