#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "billing/billing_account.h"
#include "billing/payment_method_table.h"
#include "core/error.h"

namespace gpuwerk::billing {

/// Who asks for a card setup: the billing account and the signed-in person asking (its manager:
/// PaymentMethods checks BillingAccount::may_manage before the provider is asked).
struct CardSetupRequest {
  BillingAccount account;
  std::string person_id;  ///< "per_…"
  std::string email;      ///< the person's email as stored (e.g. for a provider's customer record)
};

/// What a provider answers to a card setup: where the person enters their card.
struct CardSetup {
  /// The page to open (Stripe: a Checkout Session in `mode=setup`, its `url`). Never empty on
  /// success.
  std::string url;
  /// When the page stops working (Unix seconds); 0 when the provider does not say.
  int64_t expires_at = 0;
  /// The provider's id of the page (Stripe: the Checkout Session's `cs_…`), which its completion
  /// names; PaymentMethods records who began it (CardSetupTable). "" when the provider has none.
  std::string provider_ref;
};

/// One line of a closed monthly invoice, as the provider is asked to charge it.
struct InvoiceLineToPush {
  std::string id;            ///< our line id: idempotency keys are derived from it
  std::string description;   ///< for the customer, e.g. "gpu-box (spark-1x), 61 minutes"
  int64_t amount_minor = 0;  ///< integer minor units of the invoice's currency (R-13), >= 0
};

/// A closed invoice of one billing account and one UTC calendar month (the `meter` part of
/// billing makes it; docs/billing.md).
struct InvoiceToPush {
  std::string id;                  ///< our invoice id: idempotency keys are derived from it
  std::string billing_account_id;  ///< BillingAccount::id
  std::string month;               ///< "YYYY-MM", UTC
  std::string currency;            ///< ISO 4217, lowercase as Stripe takes it, e.g. "eur"
  std::vector<InvoiceLineToPush> lines;
  int64_t total_minor = 0;  ///< the sum of the lines' amounts
};

/// What became of a pushed invoice on the provider's side.
struct PushedInvoice {
  std::string provider_ref;  ///< the provider's invoice id (Stripe "in_…")
  std::string status;        ///< the provider's word, e.g. "open", "paid"
};

/// The seam between gpuwerk and whoever holds people's payment methods and collects money
/// (R-14; docs/billing.md "Providers"). The server asks a provider only these things; what a
/// provider stores of its own (Stripe customers, webhooks) is its own. Implementations:
/// ManualProvider (the default; the operator records cards), and Stripe (the `stripe` part of
/// billing). Thread-safe: calls may come from several HTTP threads at once. Calls may block on
/// the network: never call one inside a store transaction.
class PaymentProvider {
 public:
  virtual ~PaymentProvider() = default;

  /// The provider's label wherever a method shows ("manual", "stripe"); stored in
  /// PaymentMethod::provider.
  virtual std::string_view name() const = 0;

  /// Whether this provider collects closed invoices itself (PushInvoice does something): the
  /// month close then queues each invoice it makes for a push (InvoicePusher). ManualProvider:
  /// false (the operator exports CSV); StripeProvider: true.
  virtual bool CollectsInvoices() const = 0;

  /// What a person whose billing account has no payment method is told to do (the detail of a
  /// 402 payment_method_required, R-14), for a person who manages their account's method
  /// (`may_manage`) or one who does not (a team member). One or two sentences, said once: the
  /// 402's message puts it after "… needs a payment method …", so it does not repeat that, and it
  /// holds no placeholder to fill in (nor the operator's own commands).
  virtual std::string HowToAddPaymentMethod(bool may_manage) const = 0;

  /// Starts adding (or replacing) the payment method of `request.account`: the page the person
  /// opens to enter a card. Errors: kFailedPrecondition `manual_provider` when this provider
  /// does not take cards from people (ManualProvider: the operator records them); kUnavailable
  /// `provider_unavailable` when the provider cannot be reached; the provider's own.
  virtual core::Result<CardSetup> BeginCardSetup(const CardSetupRequest& request) = 0;

  /// One line that describes `method` for people, e.g. "visa ending 4242, expires 12/2030
  /// (recorded by the operator)". No network.
  virtual std::string Describe(const PaymentMethod& method) const = 0;

  /// Detaches `method` from `account` on the provider's side (Stripe: detaches the payment
  /// method from the customer), before gpuwerk forgets it. A method the provider no longer
  /// knows is success. Errors: kUnavailable `provider_unavailable`; the provider's own.
  virtual core::Result<void> Detach(const BillingAccount& account, const PaymentMethod& method) = 0;

  /// Pushes a closed invoice to be collected (Stripe: invoice items, an invoice, finalize), at
  /// most once per invoice id however often it is called. Errors: kFailedPrecondition
  /// `not_applicable` when the provider collects nothing itself (ManualProvider: the operator
  /// exports invoices as CSV); kUnavailable `provider_unavailable`; the provider's own.
  virtual core::Result<PushedInvoice> PushInvoice(const InvoiceToPush& invoice) = 0;
};

}  // namespace gpuwerk::billing
