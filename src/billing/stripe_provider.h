#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "billing/payment_provider.h"
#include "billing/stripe_client.h"
#include "billing/stripe_customer_table.h"
#include "billing/stripe_invoice_ledger.h"
#include "core/clock.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// How old (by our clock, since it was stored just before its first send) a stored invoice
/// request without an answer may be and still be resent as it is. Stripe keeps the first answer
/// under an idempotency key for at least 24 hours and may forget it after that; a key reused
/// after Stripe forgot it makes a new request (https://docs.stripe.com/api/idempotent_requests:
/// keys "are eligible to be removed from the system automatically after they're at least 24
/// hours old"). So from this age on PushInvoice first looks the object up at Stripe by the
/// metadata gpuwerk put on it, and sends only when Stripe has none. 23 h: an hour inside
/// Stripe's documented window, for a slow first attempt and clocks that differ.
inline constexpr std::chrono::seconds kStripeKeySafeAge{std::chrono::hours(23)};

/// Where the Stripe provider sends people back to after a Checkout, and how it pages.
struct StripeProviderOptions {
  std::string public_url;  ///< the server's public URL, no trailing "/" (ServerConfig::public_url)
  /// `limit` of each list page an invoice look-up asks for (Stripe's list endpoints take 1..100;
  /// clamped to that).
  int lookup_page_size = 100;
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
  /// Stripe's 24 h key window). A step without an answer stored kStripeKeySafeAge ago or more
  /// is looked up at Stripe before it is resent (an invoice item by `metadata[gpuwerk_line]`
  /// among `GET /v1/invoiceitems?customer=…`, the invoice by `metadata[gpuwerk_invoice]` among
  /// `GET /v1/invoices?customer=…`, both paged; finalize: `GET /v1/invoices/{in}` not `draft`):
  /// what is found is recorded as its answer, and it is sent only when nothing is found.
  /// Errors: kFailedPrecondition `no_customer`; kUnavailable `provider_unavailable` (also a
  /// look-up answer gpuwerk cannot use, or one past FindByMetadata's page limit: nothing sent);
  /// StripeClient::Call's; the store's.
  core::Result<PushedInvoice> PushInvoice(const InvoiceToPush& invoice) override;

  /// The account's live Stripe customer id, creating one on Stripe (idempotency key derived
  /// from the account id and how many customers it had) and recording it when there is none,
  /// and replacing one Stripe says is deleted. A live customer whose `email` is not `email` (the
  /// address of whoever sets up the card now: a team's current owner) gets it (POST
  /// /v1/customers/{cus} `email`). Errors: kUnavailable `provider_unavailable`;
  /// StripeClient::Call's; the store's.
  core::Result<std::string> EnsureCustomer(const BillingAccount& account, const std::string& email);

 private:
  /// Looks for the object a stored request may have made at Stripe: its id, or nullopt when
  /// Stripe has none. Errors: StripeClient::Call's; kUnavailable `provider_unavailable`.
  using LookUp = std::function<core::Result<std::optional<std::string>>()>;

  /// Sends the request stored under `fresh`'s key (storing `fresh` first when none is), unless
  /// it was answered already; the id Stripe answered. A stored request without an answer that is
  /// kStripeKeySafeAge old or older is sent only when `look_up` finds nothing; what it finds is
  /// recorded as the answer instead.
  core::Result<std::string> SendOnce(const StripeInvoiceRequest& fresh, const LookUp& look_up);
  /// The id of the first object of `customer` on Stripe's list `path` (e.g. "/v1/invoices",
  /// newest first, paged with `starting_after` while `has_more`) whose `metadata[key]` is
  /// `value`; nullopt when none. Errors: StripeClient::Call's; kUnavailable
  /// `provider_unavailable` for an answer that is not a list of objects with usable ids, or
  /// more than kMaxLookUpPages pages.
  core::Result<std::optional<std::string>> FindByMetadata(std::string_view path,
                                                          const std::string& customer,
                                                          const std::string& key,
                                                          const std::string& value) const;
  /// `stripe_invoice` when Stripe says it is no longer a `draft` (finalized, or past that);
  /// nullopt while it is a draft. Errors: StripeClient::Call's (kNotFound when Stripe has no such
  /// invoice); kUnavailable `provider_unavailable` for an invoice without a status.
  core::Result<std::optional<std::string>> FindFinalized(const std::string& stripe_invoice) const;

  /// How many list pages FindByMetadata reads before it gives up (sending nothing).
  static constexpr int kMaxLookUpPages = 1000;

  store::Database& db_;
  core::Clock& clock_;
  const StripeClient& client_;
  StripeProviderOptions options_;
};

/// Whether `id` may go into a Stripe URL path: 1..255 of [A-Za-z0-9_].
bool IsStripeId(std::string_view id);

}  // namespace gpuwerk::billing
