#pragma once

#include "billing/payment_provider.h"

namespace gpuwerk::billing {

/// The `manual` provider, the default (and `gpuwerk up`'s): the operator records and clears
/// people's payment methods (`gpuwerk admin billing set-card` / `clear-card`, audited) and collects
/// money outside gpuwerk. People cannot add a card themselves (`manual_provider`), detaching is
/// forgetting, and invoices are not pushed anywhere (`not_applicable`). Stateless; thread-safe.
class ManualProvider final : public PaymentProvider {
 public:
  /// "manual".
  static constexpr std::string_view kName = "manual";

  std::string_view name() const override { return kName; }
  /// False: the operator collects money outside gpuwerk.
  bool CollectsInvoices() const override { return false; }
  std::string HowToAddPaymentMethod(bool may_manage) const override;
  /// Always kFailedPrecondition `manual_provider`: ask the operator.
  core::Result<CardSetup> BeginCardSetup(const CardSetupRequest& request) override;
  std::string Describe(const PaymentMethod& method) const override;
  /// Nothing to tell anyone: success.
  core::Result<void> Detach(const BillingAccount& account, const PaymentMethod& method) override;
  /// Always kFailedPrecondition `not_applicable`.
  core::Result<PushedInvoice> PushInvoice(const InvoiceToPush& invoice) override;
};

/// "visa ending 4242, expires 12/2030", leaving out what `method` does not have (no last4, no
/// expiry). For providers' Describe.
std::string CardSummary(const PaymentMethod& method);

}  // namespace gpuwerk::billing
