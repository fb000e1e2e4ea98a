#pragma once

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "protocol/relay_messages.h"
#include "sched/instance_service.h"
#include "store/database.h"

namespace gpuwerk::access {

/// The relay's access decision taken from the store (DESIGN.md; cases C06, C09): for
/// `POST /api/v1/relay/authorize` (remote relays) and, through an adapter in app/, for `gpuwerk
/// up`'s in-process relay, so both decide alike. The person who authenticated is the owner of the
/// offered key (keys::SshKeyTable: a key belongs to one account at most); the candidates are
/// that person's live instances (desired `running`) that hold the key (sched::InstanceTable), and
/// an allowed login's target names that person, so the relay session is recorded as theirs. The
/// routing rule over the candidates is protocol::DecideRelayLogin (docs/ssh.md: by hostname
/// only). A deleted instance, or a key no longer attached, is refused at the next login and at
/// the relay's next re-authorization.
///
/// The target's upstream (issue 12 finding 1; docs/ssh.md "Upstream address") is node 0's host's
/// address as the operator registered it (sched::Host::ssh_address), never the agent's report,
/// and the sshd port its agent reported only when inside the host's registered range
/// (sched::Instance::ssh_port). A named instance whose host has no registered address is refused
/// with a banner saying it is not reachable yet, and the audit event
/// `relay.upstream_unregistered` (actor the person, target the instance, detail host and
/// hostname) tells the operator; one whose port is not known (or not in the range) is refused
/// with a banner that says to try again in a minute. The target carries node 0's pinned sshd host
/// key (sched::Instance::ssh_host_key_fingerprint; docs/ssh.md "Host key pinning"), which the
/// relay requires of the sshd it reaches.
///
/// Errors: the store's (the relay then refuses with "try again"). Thread-safe.
class RelayAccess {
 public:
  RelayAccess(store::Database& db, sched::InstanceService& instances, core::Clock& clock,
              core::Rng& rng)
      : db_(db), instances_(instances), clock_(clock), rng_(rng) {}
  core::Result<protocol::RelayAuthorizeDecision> Authorize(
      const protocol::RelayAuthorizeRequest& request);

 private:
  store::Database& db_;
  sched::InstanceService& instances_;
  core::Clock& clock_;
  core::Rng& rng_;
};

}  // namespace gpuwerk::access
