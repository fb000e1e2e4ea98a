#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "billing/payment_methods.h"
#include "billing/stripe_client.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// The owner of a solo account (SoloBillingAccountId); nobody for any other account (billing
/// does not know teams: app/ installs the teams-aware reader).
core::Result<AccountOwners> SoloAccountOwners(store::Transaction& tx,
                                              const std::string& billing_account_id);

/// What StripeWebhooks needs besides its collaborators.
struct StripeWebhooksOptions {
  /// The endpoint's signing secrets ("whsec_…"); more than one while the operator rolls them.
  std::vector<std::string> signing_secrets;
  AccountOwnersOf owners = &SoloAccountOwners;
  std::string public_url;             ///< for links in mails, no trailing "/"
  std::function<void()> mail_queued;  ///< wakes the outbox worker after a commit; optional
};

/// What became of one delivery.
struct WebhookOutcome {
  std::string event_id;
  std::string type;
  /// "applied", "duplicate" (the ledger had it), "stale" (an older event than the state it
  /// would change, or a card setup overtaken by a change here or whose card is no longer attached:
  /// recorded, no effect), "refused" (a card setup whose person no longer manages the account:
  /// recorded and audited, no effect), "ignored" (a type, customer or Checkout Session gpuwerk
  /// does not know).
  std::string result;
};

/// Applies Stripe's webhook events (docs/stripe.md "Webhooks"; https://stripe.com/docs/webhooks
/// and the Event object of API version 2023-08-16). Each event is applied at most once: its id
/// is recorded in the ledger (StripeEventLedger) in the transaction of its effect; per aspect
/// an older event (smaller `created`) never undoes what a newer one did. Effects:
///   checkout.session.completed (mode setup) → for a Checkout Session gpuwerk began
///     (CardSetupTable; docs/billing.md "Card setups"): retrieves the SetupIntent and its
///     PaymentMethod; refuses it when the person who began it no longer manages the account
///     (PaymentMethods::MayManage; audited `billing.card_setup_refused`), drops it as stale when
///     the card changed here since it began, when it is no longer attached to the account's live
///     customer, or when a newer card event was applied; else stores it as the account's method
///     (provider "stripe"), audited `billing.payment_method_add`; after the commit detaches at
///     Stripe the card not put on file or the Stripe card replaced (best effort), and (applied
///     or stale) makes
///     the card on file the customer's invoice_settings.default_payment_method
///     (SyncDefaultCard), then PaymentMethods::NotifyCardAdded;
///   payment_method.detached → forgets it when it is the account's method on file;
///   invoice.payment_failed → a payment hold on the account (402 payment_failed for every
///     launch and restart billed to it: a team's members too) and a mail to each owner;
///   invoice.paid → that invoice's hold ends (queues drain);
///   customer.deleted → the customer is recorded as deleted (replaced at the next card setup).
/// Unknown types and customers are answered 2xx and logged (escaped). Thread-safe.
class StripeWebhooks {
 public:
  /// References outlive this.
  StripeWebhooks(store::Database& db, core::Clock& clock, core::Rng& rng,
                 const StripeClient& client, PaymentMethods& methods, mail::Outbox& outbox,
                 StripeWebhooksOptions options);

  /// Handles one delivery: `signature_header` the raw `Stripe-Signature`, `raw_body` the body
  /// exactly as it arrived. Errors: VerifyStripeSignature's (400 invalid_signature, nothing
  /// changed); kInvalidArgument `invalid_event` (signed, but not an event); kUnavailable
  /// `provider_unavailable` (a Stripe call failed: Stripe delivers again); the store's.
  core::Result<WebhookOutcome> Handle(std::string_view signature_header, std::string_view raw_body);

 private:
  struct Event;
  core::Result<std::string> CheckoutCompleted(const Event& e);
  core::Result<std::string> PaymentMethodDetached(const Event& e);
  core::Result<std::string> InvoiceEvent(const Event& e, bool paid);
  core::Result<std::string> CustomerDeleted(const Event& e);
  /// Makes the card the store holds for `billing_account_id` (provider "stripe") its live
  /// customer's `invoice_settings.default_payment_method` at Stripe (POST /v1/customers/{cus}),
  /// idempotently, after the commit that decided it; nothing when no Stripe card is on file.
  /// Serialised, so concurrent deliveries end with Stripe's default equal to the store's card.
  /// Errors: the StripeClient's (kUnavailable `provider_unavailable`: Stripe delivers again).
  core::Result<void> SyncDefaultCard(const std::string& billing_account_id);
  /// After a new card `pm_id` was applied to `billing_account_id`: pays each invoice the account
  /// holds a payment hold for with it (POST /v1/invoices/{in}/pay, `payment_method`, key
  /// "gpuwerk-pay-<in>-<pm>"), and ends the hold of each one Stripe answers `paid` (audited
  /// `billing.payment_hold_end`). A refusal (a declined card) or Stripe unreachable is logged and
  /// the hold stays (Stripe's own invoice.paid ends it later). No errors.
  void RetryHeldInvoices(const std::string& billing_account_id, const std::string& pm_id);
  /// Records `e` as ignored (logged) unless it was recorded already.
  core::Result<std::string> Ignore(const Event& e, std::string_view why);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  const StripeClient& client_;
  PaymentMethods& methods_;
  mail::Outbox& outbox_;
  StripeWebhooksOptions options_;
  std::mutex sync_mu_;  ///< serialises SyncDefaultCard
};

}  // namespace gpuwerk::billing
