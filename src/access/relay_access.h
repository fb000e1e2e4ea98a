#pragma once

#include "core/error.h"
#include "protocol/relay_messages.h"
#include "sched/instance_service.h"
#include "store/database.h"

namespace gpuwerk::access {

/// The relay's access decision taken from the store (DESIGN.md; cases C06, C09): for
/// `POST /api/v1/relay/authorize` (remote relays) and, through an adapter in app/, for `gpuwerk
/// up`'s in-process relay, so both decide alike. The candidates are the live instances (desired
/// `running`) that hold an SSH key with the offered key's fingerprint (keys::SshKeyTable,
/// sched::InstanceTable), each with its node-0 sshd address and port as the host's agent last
/// reported them; the routing rule over them is protocol::DecideRelayLogin (docs/ssh.md). A
/// deleted instance, or a key no longer attached, is refused at the next login and at the relay's
/// next re-authorization.
///
/// Errors: the store's (the relay then refuses with "try again"). Thread-safe.
class RelayAccess {
 public:
  RelayAccess(store::Database& db, sched::InstanceService& instances)
      : db_(db), instances_(instances) {}
  core::Result<protocol::RelayAuthorizeDecision> Authorize(
      const protocol::RelayAuthorizeRequest& request);

 private:
  store::Database& db_;
  sched::InstanceService& instances_;
};

}  // namespace gpuwerk::access
