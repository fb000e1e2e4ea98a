#pragma once

#include <functional>
#include <memory>
#include <string>

#include "access/relay_credentials.h"
#include "app/server_config.h"
#include "billing/invoice_pusher.h"
#include "billing/payment_methods.h"
#include "core/access_change_feed.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/mail_transport.h"
#include "sched/instance_service.h"
#include "sched/queue_service.h"
#include "store/database.h"

namespace gpuwerk::app {

/// The control plane in one object: store, services, mail worker, HTTP server. The only place
/// (with main) that constructs and wires components; stops them in reverse order.
class ServerApp {
 public:
  /// Opens the store (running migrations), starts the outbox worker and the HTTP server.
  /// `clock` and `rng` must outlive the app (tests inject a FakeClock).
  /// Errors: invalid_config, store_unavailable, listen_failed, mail setup errors.
  static core::Result<std::unique_ptr<ServerApp>> Start(const ServerConfig& config,
                                                        core::Clock& clock, core::Rng& rng);
  ~ServerApp();

  /// The bound HTTP port and base URL (http://host:port).
  uint16_t port() const;
  std::string base_url() const;

  /// Creates the first operator if absent (used by `gpuwerk up`); true when created.
  core::Result<bool> EnsureOperator(const std::string& email, const std::string& password);
  /// Whether `password` is still the operator's password (it may have been changed since).
  core::Result<bool> PasswordMatches(const std::string& email, const std::string& password);
  /// Registers this machine as host `name` for `gpuwerk up`'s own agent, or gives its
  /// registration a fresh token (sched::HostRegistry::AddOrRotateToken, audited with the system
  /// as actor), with `ssh` as where the relay reaches its instances (the address the agent
  /// publishes sshd ports on and their range), and returns the agent token. Errors: the
  /// registry's.
  core::Result<std::string> RegisterLocalHost(const std::string& name, const std::string& gpu_type,
                                              bool gpu_required, const sched::SshRegistration& ssh);
  /// Payment methods and the launch gate: `gpuwerk up` records the operator's manual
  /// card through it; tests record and clear cards. Valid until the app is destroyed.
  billing::PaymentMethods& payment_methods();
  /// `gpuwerk up`: records a manual payment method ("manual ending 0000, expires 12/2099",
  /// labelled manual wherever it shows) for the operator `email` when their billing account has
  /// none, so that a fresh `up` can launch at once (R-14; docs/billing.md). Audited
  /// `billing.set_card` with the system as actor. Returns whether one was recorded. Errors:
  /// not_found (no such person); the store's.
  core::Result<bool> RecordLocalOperatorCard(const std::string& email);
  /// Drains every GPU type's queue now, as the periodic worker does (tests).
  core::Result<sched::DrainResult> DrainQueuesNow();
  /// Pushes the queued invoices that are due now, as the invoice worker's pass does (tests);
  /// an empty report when the provider collects nothing (manual). Errors: the store's.
  core::Result<billing::InvoicePushReport> PushDueInvoicesNow();
  /// Makes instances' `ssh_command` go through the relay at `host`:`port` (`gpuwerk up`, once
  /// its relay listens); see api::SshCommandFormat.
  void SetRelayAddress(const std::string& host, uint16_t port);
  /// The parts a relay in this process reads (tests; `gpuwerk up` runs its relay as a child
  /// process): the store, the instances, the clock and the random source. Valid until the app is
  /// destroyed.
  store::Database& database();
  sched::InstanceService& instances();
  core::Clock& clock();
  core::Rng& rng();
  /// Where access changes are published (instance deletions, keys taken off accounts, deleted
  /// API tokens): a relay in this process subscribes (tests), the relays' watch streams carry
  /// them (docs/ssh.md "Revocation").
  core::AccessChangeFeed& access_changes();
  /// The relays' credentials (docs/ssh.md "The relay's API credential"): `gpuwerk up` issues its
  /// own relay's (access::RelayCredentials::IssueLocal); tests register relays. Valid until the app
  /// is destroyed.
  access::RelayCredentials& relay_credentials();
  /// How outbox mails leave (the `mail` option, parsed at Start).
  mail::MailTransport mail_transport() const;
  /// Delivers due outbox mails now (tests).
  core::Result<int> DeliverMailNow();

  /// Stops the HTTP server (letting in-flight requests finish) and the workers. Idempotent.
  void Stop();

  struct Parts;  // internal

 private:
  explicit ServerApp(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace gpuwerk::app
