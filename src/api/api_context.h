#pragma once

#include "api/authenticator.h"
#include "api/event_hub.h"
#include "api/idempotency.h"
#include "api/ssh_command.h"
#include "auth/account_service.h"
#include "core/clock.h"
#include "keys/ssh_key_registry.h"
#include "sched/agent_sync.h"
#include "sched/desired_state_notifier.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/queue_service.h"

namespace gpuwerk::api {

/// What the resource handlers need; built and owned by app/. All references outlive the router.
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
  /// People's event streams (GET /api/v1/events); handlers that change what they show Wake() it.
  /// Null when the server runs none.
  EventHub* events = nullptr;
};

class Router;

/// Registers every /api/v1 route and the link pages (/auth/…) on `router`.
void RegisterAccountRoutes(Router& router, ApiContext& ctx);
void RegisterTokenRoutes(Router& router, ApiContext& ctx);
void RegisterSshKeyRoutes(Router& router, ApiContext& ctx);
/// /api/v1/instances and /api/v1/gpu-types.
void RegisterInstanceRoutes(Router& router, ApiContext& ctx);
/// /api/v1/admin/hosts (operators), /api/v1/agent/sync and /api/v1/agent/watch (host agents).
void RegisterHostRoutes(Router& router, ApiContext& ctx);
/// /api/v1/queue-entries and /api/v1/usage/queue.
void RegisterQueueRoutes(Router& router, ApiContext& ctx);
void RegisterAuthPages(Router& router, ApiContext& ctx);
/// "/" and "/home.js": the sign-in and SSH-key page served until the dashboard lands.
void RegisterHomePage(Router& router);

/// All of the above.
inline void RegisterApiRoutes(Router& router, ApiContext& ctx) {
  RegisterAccountRoutes(router, ctx);
  RegisterTokenRoutes(router, ctx);
  RegisterSshKeyRoutes(router, ctx);
  RegisterInstanceRoutes(router, ctx);
  RegisterHostRoutes(router, ctx);
  RegisterQueueRoutes(router, ctx);
  RegisterAuthPages(router, ctx);
  RegisterHomePage(router);
}

}  // namespace gpuwerk::api
