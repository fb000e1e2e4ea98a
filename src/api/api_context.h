#pragma once

#include <functional>
#include <string_view>

#include "access/relay_access.h"
#include "access/relay_credentials.h"
#include "api/authenticator.h"
#include "api/event_hub.h"
#include "api/idempotency.h"
#include "api/relay_watch_hub.h"
#include "api/ssh_command.h"
#include "auth/account_service.h"
#include "billing/invoice_pusher.h"
#include "billing/invoices.h"
#include "billing/payment_methods.h"
#include "billing/usage_history.h"
#include "core/clock.h"
#include "core/random.h"
#include "keys/ssh_key_registry.h"
#include "sched/agent_sync.h"
#include "sched/desired_state_notifier.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/queue_service.h"
#include "store/database.h"
#include "teams/team_service.h"

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
  /// The relays' credentials: who may call the kRelay routes, under which name
  /// (/api/v1/admin/relays registers and revokes them).
  access::RelayCredentials& relay_credentials;
  /// Relay session records (store/relay_session_records.h) until they move behind a domain API.
  store::Database& db;
  core::Rng& rng;
  /// Payment methods and the launch gate's state: GET /api/v1/billing, card setup and
  /// removal, the operator's manual cards.
  billing::PaymentMethods& payment_methods;
  /// People's event streams (GET /api/v1/events); handlers that change what they show Wake() it.
  /// Null when the server runs none.
  EventHub* events = nullptr;
  /// Teams (the /api/v1/team routes); null when the server runs none (503 teams_unavailable).
  teams::TeamService* teams = nullptr;
  /// Remote relays' access-change streams (GET /api/v1/relay/watch). Null when none.
  RelayWatchHub* relay_watch = nullptr;
  /// Invoices and the month close (GET /api/v1/billing/invoices, /api/v1/admin/invoices/*), and
  /// the usage history (GET /api/v1/usage/sessions). Null when the server runs none (503).
  billing::Invoices* invoices = nullptr;
  billing::UsageHistory* usage = nullptr;
  /// Pushes closed invoices to the provider that collects them (the month close by hand pushes
  /// the month's queued invoices). Null when the provider collects nothing (manual).
  billing::InvoicePusher* invoice_pusher = nullptr;
  /// Applies one Stripe webhook delivery (POST /api/v1/billing/webhooks/stripe): the raw
  /// `Stripe-Signature` header and the raw body in, what became of the event out (app/ installs
  /// billing::StripeWebhooks::Handle). Empty when the provider is not `stripe` (404).
  std::function<core::Result<nlohmann::json>(std::string_view signature, std::string_view body)>
      stripe_webhook;
};

}  // namespace gpuwerk::api
