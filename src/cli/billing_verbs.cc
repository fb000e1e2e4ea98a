// billing, billing add-card, billing remove-card: the caller's billing account and the payment
// method that launches and restarts need (R-14, docs/billing.md).
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// "visa ending 4242, expires 12/2030 (manual: recorded by the operator)" or what to do.
std::string MethodText(const json& state) {
  const json& method = Field(state, "payment_method");
  if (method.is_object()) return Str(method, "description");
  return "none. " + Str(state, "how_to_add");
}

/// "2026-12 so far: 12.34 USD, 5 EUR (as of …)" from GET /api/v1/billing's current_month.
std::string MonthText(const json& state) {
  const json& month = Field(state, "current_month");
  if (!month.is_object()) return "not available on this server";
  std::string amounts;
  const json& totals = Field(month, "totals");
  if (totals.is_array()) {
    for (const auto& t : totals) {
      if (!amounts.empty()) amounts += ", ";
      amounts += Str(t, "amount");
    }
  }
  if (amounts.empty()) amounts = "nothing yet";
  return Str(month, "month") + " so far: " + amounts + " (as of " + Str(month, "as_of") + ")";
}

core::Result<void> BillingShowVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json state, server.Ok("GET", "/api/v1/billing"));
  if (PrintJsonIfAsked(ctx, state)) return {};
  const json& account = Field(state, "account");
  std::string who = Str(account, "kind") + " (" + Str(account, "name") + ")";
  if (Field(account, "may_manage") == false) who += ", managed by its owner";
  std::vector<std::pair<std::string, std::string>> rows = {
      {"Account:", who},
      {"Provider:", Str(state, "provider")},
      {"Card:", MethodText(state)},
  };
  if (const json& hold = Field(state, "payment_hold"); hold.is_object()) {
    rows.emplace_back("Hold:", "the payment of invoice " + Str(hold, "invoice_id") + " failed (" +
                                   Str(hold, "since") +
                                   "): launches and restarts are refused until it is paid" +
                                   (Field(account, "may_manage") == false
                                        ? "; ask the team's owner"
                                        : "; pay it, or add a card ('gpuwerk billing add-card'), "
                                          "which pays it at once"));
  }
  if (const json& own = Field(state, "own_payment_method"); own.is_object()) {
    rows.emplace_back("Own card:", Str(own, "description") + " (yours, used when in no team)");
  }
  rows.emplace_back("Month:", MonthText(state));
  std::string text;
  for (const auto& [label, value] : rows) {
    text += label + std::string(11 - label.size(), ' ') + SafeText(value) + "\n";
  }
  Print(ctx, text);
  return {};
}

core::Result<void> BillingAddCardVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  // Under the manual provider the server answers 409 manual_provider, saying to ask the
  // operator: that is printed as the failure.
  GPUWERK_ASSIGN_OR_RETURN(json setup, server.Ok("POST", "/api/v1/billing/card-setup"));
  if (PrintJsonIfAsked(ctx, setup)) return {};
  Print(ctx, "Open this page to add your card:\n  " + SafeText(Str(setup, "url")) + "\n");
  return {};
}

core::Result<void> BillingRemoveCardVerb(VerbContext& ctx, const bool& yes) {
  // As the dashboard does: asked first (running instances keep running; launches stop).
  GPUWERK_TRY(Confirm(ctx, yes,
                      "Remove your payment method? Running instances keep running and billing; "
                      "new launches and restarts are refused until a card is on file. (y/N) ",
                      "removing the payment method stops new launches and restarts; not on a "
                      "terminal, so nothing was asked and nothing removed: pass --yes to confirm",
                      "not removed: the payment method stays on file"));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json removed, server.Ok("DELETE", "/api/v1/billing/payment-method"));
  if (PrintJsonIfAsked(ctx, removed)) return {};
  Print(ctx, "Removed " + SafeText(Str(Field(removed, "removed"), "description")) + ".\n" +
                 SafeText(Str(removed, "message")) + "\n");
  return {};
}

}  // namespace

void AddBillingVerbs(CLI::App& app, const VerbRegistry& verbs) {
  CLI::App* billing =
      app.add_subcommand("billing", "Your billing account and payment method (alone: show them)");
  billing->require_subcommand(0, 1);
  verbs.AddTargetOptions(billing);
  verbs.OnRunAlone(billing, &BillingShowVerb);
  billing->footer(
      "Launching and restarting an instance need a payment method on your billing account; "
      "joining a queue does not. Under the manual provider the operator records cards "
      "('gpuwerk admin billing set-card').");
  verbs.AddVerb(*billing, "add-card",
                "Add or replace your card: prints the page to open (or what to do)",
                &BillingAddCardVerb);
  auto yes = std::make_shared<bool>(false);
  CLI::App* remove = verbs.AddVerb(
      *billing, "remove-card",
      "Remove your card (asks first): running instances keep running and billing; new launches "
      "and restarts are refused",
      yes, &BillingRemoveCardVerb);
  remove->alias("rm-card");
  remove->add_flag("-y,--yes", *yes, "remove without asking (needed without a terminal)");
}

}  // namespace gpuwerk::cli::internal
