#include "billing/manual_provider.h"

#include <fmt/format.h>

namespace gpuwerk::billing {

std::string CardSummary(const PaymentMethod& m) {
  std::string out = m.brand.empty() ? std::string("payment method") : m.brand;
  if (!m.last4.empty()) out += " ending " + m.last4;
  if (m.exp_month > 0 && m.exp_year > 0) {
    out += fmt::format(", expires {:02}/{}", m.exp_month, m.exp_year);
  }
  return out;
}

std::string ManualProvider::HowToAddPaymentMethod(bool may_manage) const {
  if (!may_manage) {
    return "Your team's owner manages its payment method: ask them to have one recorded.";
  }
  // Said to the person, who is not the operator: the operator's own command is theirs to know
  // (the dashboard shows it to operators only, with their address filled in).
  return "This server's operator records payment methods (manual billing): ask your operator to "
         "record a card for your account.";
}

core::Result<CardSetup> ManualProvider::BeginCardSetup(const CardSetupRequest&) {
  return core::Fail(core::ErrorCode::kFailedPrecondition, "manual_provider",
                    "This server's operator records payment methods (manual billing); you cannot "
                    "add a card yourself. Ask your operator to record one for your account.");
}

std::string ManualProvider::Describe(const PaymentMethod& m) const {
  return CardSummary(m) + " (manual: recorded by the operator)";
}

core::Result<void> ManualProvider::Detach(const BillingAccount&, const PaymentMethod&) {
  return {};
}

core::Result<PushedInvoice> ManualProvider::PushInvoice(const InvoiceToPush&) {
  return core::Fail(core::ErrorCode::kFailedPrecondition, "not_applicable",
                    "The manual provider collects nothing itself: the operator exports invoices.");
}

}  // namespace gpuwerk::billing
