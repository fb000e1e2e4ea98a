#pragma once

#include "access/relay_access.h"
#include "api/authenticator.h"
#include "api/event_hub.h"
#include "api/idempotency.h"
#include "api/ssh_command.h"
#include "auth/account_service.h"
#include "core/clock.h"
#include "core/random.h"
#include "keys/ssh_key_registry.h"
#include "sched/agent_sync.h"
#include "sched/desired_state_notifier.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/queue_service.h"
#include "store/database.h"

namespace gpuwerk::api {

/// What the handlers of the route table (api_routes.h) need; built and owned by app/. All
/// references outlive the router.
struct ApiContext {
  auth::AccountService& accounts;
  keys::SshKeyRegistry& ssh_keys;
  const Authenticator& authn;
  core::Clock& clock;
  sched::HostRegistry& hosts;
  sched::InstanceService& instances;
  sched::AgentSync& agent_sync;
  sched::DesiredStateNotifier& desired_state;
  sched::QueueService& queue;
  IdempotencyKeys& idempotency;
  SshCommandFormat& ssh_command;
  /// Decides remote relays' logins (POST /api/v1/relay/authorize): the same decision as `gpuwerk
  /// up`'s in-process relay takes.
  access::RelayAccess& relay_access;
  /// Relay session records (store/relay_session_records.h) until they move behind a domain API.
  store::Database& db;
  core::Rng& rng;
  /// People's event streams (GET /api/v1/events); handlers that change what they show Wake() it.
  /// Null when the server runs none.
  EventHub* events = nullptr;
};

}  // namespace gpuwerk::api
