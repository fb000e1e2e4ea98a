#pragma once

#include <string>

#include "billing/payment_provider.h"
#include "billing/stripe_client.h"
#include "billing/stripe_customer_table.h"
#include "billing/stripe_invoice_ledger.h"
#include "core/clock.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// Where the Stripe provider sends people back to after a Checkout.
struct StripeProviderOptions {
  std::string public_url;  ///< the server's public URL, no trailing "/" (ServerConfig::public_url)
};

/// The `stripe` provider (docs/stripe.md): people add a card in a Stripe Checkout Session in
/// `mode=setup`; Stripe holds the card, gpuwerk keeps only brand/last4/expiry and the "pm_…" id
/// (set by StripeWebhooks on `checkout.session.completed`). Each billing account gets a Stripe
/// customer on first need (stored in `stripe_customers`); one deleted on Stripe's side (retrieve
/// answers `deleted: true` or `resource_missing`) is recorded as deleted and replaced at the next
/// card setup. Thread-safe: state lives in the store; network calls happen outside transactions.
class StripeProvider final : public PaymentProvider {
 public:
  /// "stripe".
  static constexpr std::string_view kName = "stripe";

  /// References outlive the provider.
  StripeProvider(store::Database& db, core::Clock& clock, const StripeClient& client,
                 StripeProviderOptions options);

  std::string_view name() const override { return kName; }
  /// True: closed invoices are pushed to Stripe (PushInvoice).
  bool CollectsInvoices() const override { return true; }
  std::string HowToAddPaymentMethod(bool may_manage) const override;
  /// Ensures the account's Stripe customer, then creates a Checkout Session (`mode=setup`,
  /// `payment_method_types[]=card`, client_reference_id and metadata[billing_account_id] the
  /// account's id) and answers its `url` and `expires_at`. Errors: kUnavailable
  /// `provider_unavailable`; StripeClient::Call's; the store's.
  core::Result<CardSetup> BeginCardSetup(const CardSetupRequest& request) override;
  /// "visa ending 4242, expires 12/2030".
  std::string Describe(const PaymentMethod& method) const override;
  /// POST /v1/payment_methods/{pm}/detach (Stripe's PaymentMethod object; afterwards its
  /// `customer` is null and it is no longer the customer's default for invoices). A pm Stripe
  /// does not know (resource_missing), or one no longer attached (Stripe's 400 without a code,
  /// confirmed by GET /v1/payment_methods/{pm} answering `customer: null`), is success. Errors:
  /// kUnavailable `provider_unavailable`; StripeClient::Call's (`stripe_error`).
  core::Result<void> Detach(const BillingAccount& account, const PaymentMethod& method) override;
  /// Invoice items (one per line), an invoice with `pending_invoice_items_behavior=include`,
  /// finalize: each request stored with its idempotency key (derived from our line and invoice
  /// ids) and exact body before it is sent, so a retry after a lost answer resends the same
  /// bytes; a step answered is not sent again, and a push done is never repeated (even after
  /// Stripe's 24 h key window). Errors: kFailedPrecondition `no_customer`; kUnavailable
  /// `provider_unavailable`; StripeClient::Call's; the store's.
  core::Result<PushedInvoice> PushInvoice(const InvoiceToPush& invoice) override;

  /// The account's live Stripe customer id, creating one on Stripe (idempotency key derived
  /// from the account id and how many customers it had) and recording it when there is none,
  /// and replacing one Stripe says is deleted. Errors: kUnavailable `provider_unavailable`;
  /// StripeClient::Call's; the store's.
  core::Result<std::string> EnsureCustomer(const BillingAccount& account, const std::string& email);

 private:
  /// Sends the request stored under `fresh`'s key (storing `fresh` first when none is), unless
  /// it was answered already; the id Stripe answered.
  core::Result<std::string> SendOnce(const StripeInvoiceRequest& fresh);

  store::Database& db_;
  core::Clock& clock_;
  const StripeClient& client_;
  StripeProviderOptions options_;
};

/// Whether `id` may go into a Stripe URL path: 1..255 of [A-Za-z0-9_].
bool IsStripeId(std::string_view id);

}  // namespace gpuwerk::billing
