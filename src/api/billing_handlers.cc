// /api/v1/billing (R-14, docs/billing.md): a person's billing account and its payment method,
// card setup and removal (only a person who manages the account: billing_managed_by_team
// otherwise); /api/v1/admin/billing/{email}/card: the operator records or clears a payment
// method under the manual provider (audited); /api/v1/admin/billing/teams/{team}/card: the same
// for a team's billing account, named by its id or exact name.
#include <optional>
#include <string>
#include <string_view>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "billing/money.h"
#include "billing/payment_methods.h"
#include "teams/team_billing.h"

namespace gpuwerk::api {
namespace {

nlohmann::json AccountJson(const billing::BillingAccount& a) {
  return {{"id", a.id},
          {"kind", std::string(billing::ToString(a.kind))},
          {"name", a.name},
          {"may_manage", a.may_manage}};
}

nlohmann::json MethodJson(const billing::PaymentMethod& m, const std::string& description) {
  return {{"provider", m.provider},
          {"brand", m.brand},
          {"last4", m.last4},
          {"exp_month", m.exp_month},
          {"exp_year", m.exp_year},
          {"description", description},
          {"created_at", core::FormatRfc3339(m.created_at)},
          {"updated_at", core::FormatRfc3339(m.updated_at)}};
}

/// GET /api/v1/billing and what the card routes answer with it.
nlohmann::json StateJson(billing::PaymentMethods& methods, const billing::BillingState& s) {
  nlohmann::json j = {{"account", AccountJson(s.account)},
                      {"provider", s.provider},
                      {"payment_method", nullptr},
                      {"how_to_add", nullptr}};
  if (s.method && !s.account.may_manage) {
    // A team member learns that the team's card is on file, never which card it is.
    j["payment_method"] = {{"provider", s.method->provider},
                           {"brand", nullptr},
                           {"last4", nullptr},
                           {"exp_month", nullptr},
                           {"exp_year", nullptr},
                           {"description", "a payment method managed by your team's owner"},
                           {"created_at", nullptr},
                           {"updated_at", nullptr}};
  } else if (s.method) {
    j["payment_method"] = MethodJson(*s.method, s.method_description);
  } else {
    j["how_to_add"] = methods.provider().HowToAddPaymentMethod(s.account.may_manage);
  }
  j["payment_hold"] = PaymentHoldJson(s.hold);
  // A hold on the caller's own account while they bill to a team: it refuses their launches too.
  j["own_payment_hold"] = PaymentHoldJson(s.own_hold);
  // The caller's own card while they bill to a team: it stays theirs (docs/teams.md "Billing").
  j["own_payment_method"] = nullptr;
  if (s.own_method) j["own_payment_method"] = MethodJson(*s.own_method, s.own_method_description);
  return j;
}

/// The current month's running total (docs/billing.md "Running total").
nlohmann::json CurrentMonthJson(const billing::CurrentMonth& m) {
  nlohmann::json totals = nlohmann::json::array();
  for (const billing::CurrencyTotal& t : m.totals) {
    totals.push_back({{"currency", t.currency},
                      {"amount_minor", t.amount_minor},
                      {"amount", billing::FormatAmount(t.amount_minor, t.currency)}});
  }
  return {
      {"month", m.month}, {"totals", std::move(totals)}, {"as_of", core::FormatRfc3339(m.as_of)}};
}

/// The JSON card an operator sends: {brand, last4, exp_month, exp_year}.
core::Result<billing::CardFacts> CardFrom(const Request& req) {
  GPUWERK_ASSIGN_OR_RETURN(auto body,
                           ParseJsonObject(req, {"brand", "last4", "exp_month", "exp_year"}));
  billing::CardFacts card;
  // Lengths and characters are ValidateCard's to judge (invalid_brand, invalid_last4); the body
  // limit bounds what is read here.
  GPUWERK_ASSIGN_OR_RETURN(card.brand, RequireString(body, "brand", 1024, 0));
  GPUWERK_ASSIGN_OR_RETURN(card.last4, RequireString(body, "last4", 1024, 0));
  GPUWERK_ASSIGN_OR_RETURN(card.exp_month, RequireInt(body, "exp_month", -1'000'000, 1'000'000));
  GPUWERK_ASSIGN_OR_RETURN(card.exp_year, RequireInt(body, "exp_year", -1'000'000, 1'000'000));
  return card;
}

/// What the operator's set-card routes answer: who was named (`{key: value}`, "email" or
/// "team"), the billing account and the method now on file.
nlohmann::json SetCardJson(billing::PaymentMethods& methods, const char* key,
                           const std::string& value, const billing::PaymentMethod& stored) {
  return {{key, value},
          {"billing_account", stored.billing_account_id},
          {"payment_method", MethodJson(stored, methods.provider().Describe(stored))}};
}

/// What the operator's clear-card routes answer: who was named, the removed method (or null) and
/// what it means.
nlohmann::json ClearCardJson(billing::PaymentMethods& methods, const char* key,
                             const std::string& value,
                             const std::optional<billing::PaymentMethod>& removed) {
  nlohmann::json j = {{key, value}, {"removed", nullptr}};
  if (removed) {
    j["removed"] = MethodJson(*removed, methods.provider().Describe(*removed));
    j["message"] =
        "Payment method cleared. Running instances keep running and billing; new launches and "
        "restarts are refused until one is on file again.";
  } else {
    j["message"] = "No payment method was on file; nothing changed.";
  }
  return j;
}

}  // namespace

namespace handlers {

Answer GetBilling(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto state, ctx.payment_methods.State(call.who.person_id));
  nlohmann::json j = StateJson(ctx.payment_methods, state);
  j["current_month"] = nullptr;
  if (ctx.invoices) {
    GPUWERK_ASSIGN_OR_RETURN(auto month, ctx.invoices->CurrentMonthOf(call.who.person_id));
    j["current_month"] = CurrentMonthJson(month);
  }
  return Response::Json(200, j);
}

Answer BeginCardSetup(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto setup, ctx.payment_methods.BeginCardSetup(call.who.person_id));
  nlohmann::json j = {{"url", setup.url}, {"expires_at", nullptr}};
  if (setup.expires_at > 0) j["expires_at"] = core::FormatRfc3339(setup.expires_at);
  return Response::Json(201, j);
}

/// The caller's billing state after a removal, with the payment method removed and `message`.
Answer RemovedAnswer(ApiContext& ctx, const Call& call, const auto& removed,
                     std::string_view message) {
  GPUWERK_ASSIGN_OR_RETURN(auto state, ctx.payment_methods.State(call.who.person_id));
  nlohmann::json j = StateJson(ctx.payment_methods, state);
  j["removed"] = MethodJson(removed, ctx.payment_methods.provider().Describe(removed));
  j["message"] = message;
  return Response::Json(200, j);
}

Answer RemovePaymentMethod(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto removed,
                           ctx.payment_methods.Remove(call.who.person_id, call.req.remote_address));
  return RemovedAnswer(
      ctx, call, removed,
      "Payment method removed. Running instances keep running and their billing sessions go on "
      "billing; new launches and restarts are refused until a payment method is on file again.");
}

Answer RemoveOwnPaymentMethod(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto removed, ctx.payment_methods.RemoveOwn(call.who.person_id, call.req.remote_address));
  return RemovedAnswer(ctx, call, removed,
                       "Your own payment method was removed. Instances billed to you keep running "
                       "and billing; you need a payment method again to launch on your own.");
}

Answer AdminSetCard(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(billing::CardFacts card, CardFrom(call.req));
  const std::string email = call.req.PathParam("email");
  GPUWERK_ASSIGN_OR_RETURN(auto stored, ctx.payment_methods.SetCard(call.who.person_id, email, card,
                                                                    call.req.remote_address));
  return Response::Json(200, SetCardJson(ctx.payment_methods, "email", email, stored));
}

Answer AdminClearCard(ApiContext& ctx, Call& call) {
  const std::string email = call.req.PathParam("email");
  GPUWERK_ASSIGN_OR_RETURN(auto removed, ctx.payment_methods.ClearCard(call.who.person_id, email,
                                                                       call.req.remote_address));
  return Response::Json(200, ClearCardJson(ctx.payment_methods, "email", email, removed));
}

Answer AdminSetTeamCard(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(billing::CardFacts card, CardFrom(call.req));
  const std::string ref = call.req.PathParam("team");
  GPUWERK_ASSIGN_OR_RETURN(
      auto stored, ctx.payment_methods.SetCardOf(
                       call.who.person_id,
                       [&](store::Transaction& tx) { return teams::TeamCardHolder(tx, ref); }, card,
                       call.req.remote_address));
  return Response::Json(200, SetCardJson(ctx.payment_methods, "team", ref, stored));
}

Answer AdminClearTeamCard(ApiContext& ctx, Call& call) {
  const std::string ref = call.req.PathParam("team");
  GPUWERK_ASSIGN_OR_RETURN(
      auto removed, ctx.payment_methods.ClearCardOf(
                        call.who.person_id,
                        [&](store::Transaction& tx) { return teams::TeamCardHolder(tx, ref); },
                        call.req.remote_address));
  return Response::Json(200, ClearCardJson(ctx.payment_methods, "team", ref, removed));
}

Answer StripeWebhook(ApiContext& ctx, Call& call) {
  if (!ctx.stripe_webhook) {
    return core::Fail(core::ErrorCode::kNotFound, "not_found",
                      "The payment provider is not stripe: no Stripe webhooks here.");
  }
  GPUWERK_ASSIGN_OR_RETURN(nlohmann::json outcome,
                           ctx.stripe_webhook(call.req.Header("Stripe-Signature"), call.req.body));
  return Response::Json(200, outcome);
}

}  // namespace handlers
}  // namespace gpuwerk::api
