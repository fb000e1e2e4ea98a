#include "access/relay_access.h"

#include <map>
#include <vector>

#include "audit/audit_log.h"
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
  std::map<std::string, std::string> host_of;  // instance id → node 0's host name
  for (const auto& row : rows) {
    if (row.person_id != person_id) continue;  // an instance holds only its owner's keys
    auto in = instances_.Get(row.person_id, row.id);
    if (!in) {
      if (in.error().code == core::ErrorCode::kNotFound) continue;  // deleted meanwhile
      return std::unexpected(in.error());
    }
    host_of[in->id] = in->hosts.empty() ? std::string() : in->hosts[0];
    // The registered address and the port inside the registered range only (sched::Instance);
    // "" and 0 when there is none, and then no login goes anywhere (below).
    reachable.push_back({.instance_id = in->id,
                         .name = in->name,
                         .hostname = in->hostname,
                         .person_id = person_id,
                         .upstream_host = in->ssh_address,
                         .upstream_port = in->ssh_port > 0 && in->ssh_port <= 65535
                                              ? static_cast<uint16_t>(in->ssh_port)
                                              : static_cast<uint16_t>(0),
                         .upstream_host_key_fingerprint = in->ssh_host_key_fingerprint});
  }
  protocol::RelayAuthorizeDecision decision =
      protocol::DecideRelayLogin(request, std::move(reachable));
  if (!decision.target) return decision;
  const protocol::RelayTarget& t = *decision.target;
  const std::string which = "gpuwerk: instance " + t.instance_name + " (" + t.hostname + ")";
  if (t.upstream_host.empty()) {
    const std::string host = host_of[t.instance_id];
    GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
      return audit::RecordAudit(tx, clock_, rng_,
                                {.actor_id = t.person_id,
                                 .action = "relay.upstream_unregistered",
                                 .target = t.instance_id,
                                 .source_address = request.source_address,
                                 .detail = {{"host", host}, {"hostname", t.hostname}}});
    }));
    return protocol::RelayAuthorizeDecision::Refuse(
        which +
        " is not reachable yet: the operator has not registered the SSH address of its host. Your "
        "own key was accepted, and this was recorded for the operator; try again later.\n");
  }
  if (t.upstream_port == 0) {
    return protocol::RelayAuthorizeDecision::Refuse(
        which +
        " is not reachable yet: its sshd has not been reported on a port the relay may use. If it "
        "was just created or restarted, try again in a minute; otherwise its status shows why.\n");
  }
  return decision;
}

}  // namespace gpuwerk::access
