#include "billing/stripe_webhooks.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "audit/audit_log.h"
#include "auth/person_table.h"
#include "billing/billing_account_id.h"
#include "billing/card_setup_table.h"
#include "billing/payment_hold_table.h"
#include "billing/payment_method_table.h"
#include "billing/stripe_customer_table.h"
#include "billing/stripe_event_ledger.h"
#include "billing/stripe_provider.h"
#include "billing/stripe_signature.h"
#include "core/strings.h"

namespace gpuwerk::billing {

struct StripeWebhooks::Event {
  std::string id;
  std::string type;
  int64_t created = 0;
  nlohmann::json object;  ///< data.object
};

namespace {

using nlohmann::json;

std::string Str(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t Int(const json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

/// An id field that may be expanded into its object: the id either way.
std::string IdOf(const json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  if (it == object.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  return Str(*it, "id");
}

core::Error InvalidEvent(std::string message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_event", std::move(message));
}

/// Already applied: the ledger answers; the effect ran in the transaction that recorded it.
core::Result<bool> AlreadySeen(store::Transaction& tx, const std::string& id) {
  return StripeEventLedger::Seen(tx, id);
}

mail::Mail PaymentFailedMail(const std::string& to, const std::string& invoice_id,
                             const std::string& team_name, const std::string& public_url) {
  mail::Mail m;
  m.to = to;
  m.subject = "gpuwerk: a payment failed";
  if (team_name.empty()) {
    m.text_body = fmt::format(
        "The payment of your gpuwerk invoice {} failed.\n\n"
        "Until it is paid, new launches and restarts are refused (running instances keep "
        "running). Pay it from the link in Stripe's mail, or add another card at {}/billing: "
        "a new card is charged for this invoice at once, and launches are possible again as "
        "soon as it is paid.\n",
        invoice_id, public_url);
  } else {
    m.text_body = fmt::format(
        "The payment of team \"{}\"'s gpuwerk invoice {} failed.\n\n"
        "Until it is paid, the team's members cannot launch or restart instances (running "
        "instances keep running). As an owner of the team, pay it from the link in Stripe's "
        "mail, or add another card at {}/billing: a new card is charged for this invoice at "
        "once, and the team launches again as soon as it is paid.\n",
        core::BoundedPrintable(team_name, 100), invoice_id, public_url);
  }
  return m;
}

}  // namespace

core::Result<AccountOwners> SoloAccountOwners(store::Transaction& tx,
                                              const std::string& billing_account_id) {
  constexpr std::string_view kSolo = "solo_";
  AccountOwners out;
  if (!billing_account_id.starts_with(kSolo)) return out;
  GPUWERK_ASSIGN_OR_RETURN(auto email,
                           auth::PersonTable::Email(tx, billing_account_id.substr(kSolo.size())));
  if (email) out.emails.push_back(std::move(*email));
  return out;
}

StripeWebhooks::StripeWebhooks(store::Database& db, core::Clock& clock, core::Rng& rng,
                               const StripeClient& client, PaymentMethods& methods,
                               mail::Outbox& outbox, StripeWebhooksOptions options)
    : db_(db),
      clock_(clock),
      rng_(rng),
      client_(client),
      methods_(methods),
      outbox_(outbox),
      options_(std::move(options)) {}

core::Result<WebhookOutcome> StripeWebhooks::Handle(std::string_view signature_header,
                                                    std::string_view raw_body) {
  GPUWERK_TRY(VerifyStripeSignature(signature_header, raw_body, options_.signing_secrets,
                                    clock_.NowUnix()));
  const json body = json::parse(raw_body, nullptr, /*allow_exceptions=*/false);
  Event e;
  e.id = Str(body, "id");
  e.type = Str(body, "type");
  e.created = Int(body, "created");
  if (body.is_object()) {
    if (auto data = body.find("data"); data != body.end() && data->is_object()) {
      e.object = data->value("object", json::object());
    }
  }
  if (e.id.empty() || e.id.size() > 255 || e.type.empty() || e.type.size() > 255 ||
      !e.object.is_object()) {
    return core::Fail(InvalidEvent("The body is not a Stripe event (id, type, data.object)."));
  }
  GPUWERK_ASSIGN_OR_RETURN(bool seen,
                           db_.Read([&](store::Transaction& tx) { return AlreadySeen(tx, e.id); }));
  WebhookOutcome out{.event_id = e.id, .type = e.type, .result = "duplicate"};
  if (seen) {
    if (e.type == "checkout.session.completed") {
      // A delivery again after the Stripe call that follows the commit failed (503): set
      // Stripe's default card now.
      GPUWERK_ASSIGN_OR_RETURN(auto known, db_.Read([&](store::Transaction& tx) {
        return StripeCustomerTable::Find(tx, IdOf(e.object, "customer"));
      }));
      if (known) GPUWERK_TRY(SyncDefaultCard(known->billing_account_id));
    }
    return out;
  }
  core::Result<std::string> result;
  if (e.type == "checkout.session.completed") {
    result = CheckoutCompleted(e);
  } else if (e.type == "payment_method.detached") {
    result = PaymentMethodDetached(e);
  } else if (e.type == "invoice.payment_failed") {
    result = InvoiceEvent(e, /*paid=*/false);
  } else if (e.type == "invoice.paid") {
    result = InvoiceEvent(e, /*paid=*/true);
  } else if (e.type == "customer.deleted") {
    result = CustomerDeleted(e);
  } else {
    result = Ignore(e, "a type gpuwerk does not act on");
  }
  if (!result) return core::Fail(result.error());
  out.result = *result;
  return out;
}

core::Result<std::string> StripeWebhooks::Ignore(const Event& e, std::string_view why) {
  spdlog::info("billing: Stripe event {} ({}) ignored: {}", core::BoundedPrintable(e.id),
               core::BoundedPrintable(e.type), why);
  return db_.Write([&](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(bool seen, AlreadySeen(tx, e.id));
    if (seen) return std::string("duplicate");
    GPUWERK_TRY(StripeEventLedger::Record(tx, e.id, e.type, e.created, clock_.NowUnix()));
    return std::string("ignored");
  });
}

core::Result<std::string> StripeWebhooks::CheckoutCompleted(const Event& e) {
  const std::string session_id = Str(e.object, "id");
  const std::string customer = IdOf(e.object, "customer");
  const std::string setup_intent_id = IdOf(e.object, "setup_intent");
  if (Str(e.object, "mode") != "setup" || customer.empty() || !IsStripeId(setup_intent_id) ||
      !IsStripeId(session_id)) {
    return Ignore(e, "not a card setup gpuwerk started");
  }
  struct Known {
    std::optional<StripeCustomer> customer;
    std::optional<StripeCustomer> live;  ///< the account's live customer now
    std::optional<CardSetupRecord> setup;
  };
  GPUWERK_ASSIGN_OR_RETURN(
      Known known, db_.Read([&](store::Transaction& tx) -> core::Result<Known> {
        Known k;
        GPUWERK_ASSIGN_OR_RETURN(k.customer, StripeCustomerTable::Find(tx, customer));
        if (k.customer) {
          GPUWERK_ASSIGN_OR_RETURN(
              k.live, StripeCustomerTable::FindLive(tx, k.customer->billing_account_id));
        }
        GPUWERK_ASSIGN_OR_RETURN(k.setup, CardSetupTable::Find(tx, session_id));
        return k;
      }));
  if (!known.customer) {
    spdlog::warn("billing: Stripe event {} names customer {} that no billing account has",
                 core::BoundedPrintable(e.id), core::BoundedPrintable(customer));
    return Ignore(e, "unknown customer");
  }
  const std::string account_id = known.customer->billing_account_id;
  if (!known.setup || known.setup->billing_account_id != account_id) {
    // Every setup gpuwerk begins is recorded with who began it (PaymentMethods::BeginCardSetup).
    spdlog::warn(
        "billing: Stripe event {} completes Checkout Session {}, which gpuwerk did not "
        "begin for billing account {}",
        core::BoundedPrintable(e.id), core::BoundedPrintable(session_id),
        core::BoundedPrintable(account_id));
    return Ignore(e, "a Checkout Session gpuwerk did not begin for that account");
  }
  // The network first, outside any transaction (PaymentProvider: never inside one).
  GPUWERK_ASSIGN_OR_RETURN(json intent,
                           client_.Call("GET", "/v1/setup_intents/" + setup_intent_id));
  const std::string pm_id = IdOf(intent, "payment_method");
  if (!IsStripeId(pm_id)) return Ignore(e, "the SetupIntent has no payment method");
  GPUWERK_ASSIGN_OR_RETURN(json pm, client_.Call("GET", "/v1/payment_methods/" + pm_id));
  // Only a card attached to the account's live customer now goes on file: one detached since
  // (its detach event may have come first, finding nothing on file), or one of a customer
  // deleted since, could never be charged.
  const bool attached =
      known.live && known.live->customer_id == customer && IdOf(pm, "customer") == customer;
  // Stripe's default card is not changed here: only once the transaction below has decided
  // whether this event is the newest (SyncDefaultCard, after the commit).
  const json card = pm.value("card", json::object());
  PaymentMethod method{.billing_account_id = account_id,
                       .provider = std::string(StripeProvider::kName),
                       .brand = Str(card, "brand"),
                       .last4 = Str(card, "last4"),
                       .exp_month = Int(card, "exp_month"),
                       .exp_year = Int(card, "exp_year"),
                       .provider_ref = pm_id,
                       .created_at = clock_.NowUnix(),
                       .updated_at = clock_.NowUnix()};
  if (method.brand.empty()) method.brand = Str(pm, "type");
  // What to detach at Stripe once committed: the card this one replaced, or this one when it
  // does not go on file (finding it attached there would let it be charged).
  std::optional<PaymentMethod> to_detach;
  GPUWERK_ASSIGN_OR_RETURN(
      std::string result, db_.Write([&](store::Transaction& tx) -> core::Result<std::string> {
        GPUWERK_ASSIGN_OR_RETURN(bool seen, AlreadySeen(tx, e.id));
        if (seen) return std::string("duplicate");
        GPUWERK_TRY(StripeEventLedger::Record(tx, e.id, e.type, e.created, clock_.NowUnix()));
        GPUWERK_ASSIGN_OR_RETURN(auto setup, CardSetupTable::Find(tx, session_id));
        if (!setup) return std::string("ignored");  // read above; rows are never deleted
        GPUWERK_ASSIGN_OR_RETURN(bool may_manage,
                                 methods_.MayManage(tx, setup->person_id, account_id));
        std::string refusal;
        if (!attached) {
          refusal = "card_not_attached";
        } else if (setup->state == "void") {
          refusal = "card_changed_since";
        } else if (setup->state != "open") {
          refusal = "setup_used";
        } else if (!may_manage) {
          refusal = "not_a_manager";
        }
        if (!refusal.empty()) {
          GPUWERK_TRY(CardSetupTable::Close(tx, session_id, "used"));
          GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                         {.actor_id = setup->person_id,
                                          .action = "billing.card_setup_refused",
                                          .target = account_id,
                                          .source_address = "stripe",
                                          .detail = {{"reason", refusal},
                                                     {"checkout_session", session_id},
                                                     {"brand", method.brand},
                                                     {"last4", method.last4},
                                                     {"event", e.id}}}));
          if (attached) to_detach = method;
          return std::string(refusal == "not_a_manager" ? "refused" : "stale");
        }
        GPUWERK_ASSIGN_OR_RETURN(
            bool newer, StripeEventLedger::Advance(tx, "card:" + account_id, e.created, e.id));
        GPUWERK_TRY(CardSetupTable::Close(tx, session_id, "used"));
        GPUWERK_ASSIGN_OR_RETURN(auto before, PaymentMethodTable::Find(tx, account_id));
        if (!newer) {
          if (!before || before->provider_ref != pm_id) to_detach = method;
          return std::string("stale");
        }
        if (before && before->provider == StripeProvider::kName &&
            IsStripeId(before->provider_ref) && before->provider_ref != pm_id) {
          to_detach = before;
        }
        GPUWERK_TRY(PaymentMethodTable::Upsert(tx, method));
        GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                       {.actor_id = setup->person_id,
                                        .action = "billing.payment_method_add",
                                        .target = method.billing_account_id,
                                        .source_address = "stripe",
                                        .detail = {{"provider", method.provider},
                                                   {"brand", method.brand},
                                                   {"last4", method.last4},
                                                   {"exp_month", method.exp_month},
                                                   {"exp_year", method.exp_year},
                                                   {"event", e.id}}}));
        return std::string("applied");
      }));
  if (to_detach) {
    // Best effort: the store decided already. A card left attached at Stripe is not on file
    // here and not Stripe's default (SyncDefaultCard below), so nothing charges it.
    auto detached = methods_.provider().Detach(BillingAccount{.id = account_id}, *to_detach);
    if (!detached) {
      spdlog::warn("billing: detaching card {} of billing account {} at Stripe failed: {}",
                   core::BoundedPrintable(to_detach->provider_ref),
                   core::BoundedPrintable(account_id),
                   core::BoundedPrintable(detached.error().message, 500));
    }
  }
  // Applied or stale, Stripe's default becomes what the store holds now (the newest card).
  auto synced = SyncDefaultCard(account_id);
  if (result == "applied") {
    RetryHeldInvoices(account_id, pm_id);
    methods_.NotifyCardAdded();
  }
  if (!synced) {
    if (result != "applied") return core::Fail(synced.error());
    // The card is on file here already; only Stripe's default is behind. Stripe delivers again
    // after a 503, and the delivery again sets the default (Handle). The client's own message
    // ("nothing was changed") would be untrue here: logged, not passed on.
    spdlog::warn(
        "billing: card {} of billing account {} is on file; setting it as Stripe's "
        "default failed: {}",
        core::BoundedPrintable(pm_id), core::BoundedPrintable(account_id),
        core::BoundedPrintable(synced.error().message, 500));
    return core::Fail(
        core::Error(core::ErrorCode::kUnavailable, "provider_unavailable",
                    "The card was recorded here, but making it the customer's default card at "
                    "Stripe failed; a delivery again sets it.")
            .WithDetail("retry_after_seconds", 30));
  }
  return result;
}

void StripeWebhooks::RetryHeldInvoices(const std::string& billing_account_id,
                                       const std::string& pm_id) {
  auto holds = db_.Read(
      [&](store::Transaction& tx) { return PaymentHoldTable::Of(tx, billing_account_id); });
  if (!holds) {
    spdlog::warn("billing: reading the payment holds of {} failed: {}",
                 core::BoundedPrintable(billing_account_id), holds.error().message);
    return;
  }
  for (const PaymentHold& hold : *holds) {
    if (!IsStripeId(hold.provider_ref)) continue;
    // The new card pays the failed invoice (https://docs.stripe.com/api/invoices/pay): once per
    // invoice and card, whoever delivers the event how often.
    auto paid =
        client_.Call("POST", "/v1/invoices/" + hold.provider_ref + "/pay",
                     {{"payment_method", pm_id}}, "gpuwerk-pay-" + hold.provider_ref + "-" + pm_id);
    if (!paid) {
      spdlog::warn("billing: invoice {} of {} was not paid with the new card {}: {}",
                   core::BoundedPrintable(hold.provider_ref),
                   core::BoundedPrintable(billing_account_id), core::BoundedPrintable(pm_id),
                   core::BoundedPrintable(paid.error().message, 500));
      continue;
    }
    if (Str(*paid, "status") != "paid") continue;  // Stripe's invoice.paid ends the hold later
    auto ended = db_.Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_ASSIGN_OR_RETURN(bool gone, PaymentHoldTable::Delete(tx, hold.provider_ref));
      if (!gone) return {};
      return audit::RecordAudit(tx, clock_, rng_,
                                {.action = "billing.payment_hold_end",
                                 .target = billing_account_id,
                                 .source_address = "stripe",
                                 .detail = {{"invoice", hold.provider_ref}, {"paid_with", pm_id}}});
    });
    if (!ended) {
      spdlog::warn("billing: ending the hold of invoice {} failed: {}",
                   core::BoundedPrintable(hold.provider_ref), ended.error().message);
    }
  }
}

core::Result<void> StripeWebhooks::SyncDefaultCard(const std::string& billing_account_id) {
  // One at a time: each reads the store after every commit before it, so the last to run sets
  // the newest card whatever order the concurrent deliveries finish in.
  std::lock_guard<std::mutex> lock(sync_mu_);
  struct Held {
    std::optional<PaymentMethod> method;
    std::optional<StripeCustomer> customer;
  };
  GPUWERK_ASSIGN_OR_RETURN(Held held, db_.Read([&](store::Transaction& tx) -> core::Result<Held> {
    GPUWERK_ASSIGN_OR_RETURN(auto method, PaymentMethodTable::Find(tx, billing_account_id));
    GPUWERK_ASSIGN_OR_RETURN(auto customer, StripeCustomerTable::FindLive(tx, billing_account_id));
    return Held{std::move(method), std::move(customer)};
  }));
  if (!held.method || !held.customer || held.method->provider != StripeProvider::kName ||
      !IsStripeId(held.method->provider_ref)) {
    return {};  // no Stripe card on file (removed meanwhile, or the operator's): nothing to set
  }
  auto set =
      client_.Call("POST", "/v1/customers/" + held.customer->customer_id,
                   {{"invoice_settings[default_payment_method]", held.method->provider_ref}});
  if (!set && set.error().code == core::ErrorCode::kNotFound) {
    // The card is no longer attached to the customer (detached meanwhile): its detach event
    // forgets it here.
    spdlog::warn("billing: Stripe customer {} has no payment method {}: default not set",
                 core::BoundedPrintable(held.customer->customer_id),
                 core::BoundedPrintable(held.method->provider_ref));
    return {};
  }
  if (!set) return core::Fail(set.error());
  return {};
}

core::Result<std::string> StripeWebhooks::PaymentMethodDetached(const Event& e) {
  const std::string pm_id = Str(e.object, "id");
  return db_.Write([&](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(bool seen, AlreadySeen(tx, e.id));
    if (seen) return std::string("duplicate");
    GPUWERK_TRY(StripeEventLedger::Record(tx, e.id, e.type, e.created, clock_.NowUnix()));
    GPUWERK_ASSIGN_OR_RETURN(auto method, PaymentMethodTable::FindByProviderRef(
                                              tx, std::string(StripeProvider::kName), pm_id));
    if (!method) return std::string("ignored");  // not the one on file
    GPUWERK_ASSIGN_OR_RETURN(
        bool newer,
        StripeEventLedger::Advance(tx, "card:" + method->billing_account_id, e.created, e.id));
    if (!newer) return std::string("stale");
    GPUWERK_TRY(PaymentMethodTable::Delete(tx, method->billing_account_id));
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.action = "billing.payment_method_remove",
                                    .target = method->billing_account_id,
                                    .source_address = "stripe",
                                    .detail = {{"provider", method->provider},
                                               {"brand", method->brand},
                                               {"last4", method->last4},
                                               {"event", e.id}}}));
    return std::string("applied");
  });
}

core::Result<std::string> StripeWebhooks::InvoiceEvent(const Event& e, bool paid) {
  const std::string invoice_id = Str(e.object, "id");
  const std::string customer = IdOf(e.object, "customer");
  bool mailed = false;
  GPUWERK_ASSIGN_OR_RETURN(
      std::string result, db_.Write([&](store::Transaction& tx) -> core::Result<std::string> {
        GPUWERK_ASSIGN_OR_RETURN(bool seen, AlreadySeen(tx, e.id));
        if (seen) return std::string("duplicate");
        GPUWERK_TRY(StripeEventLedger::Record(tx, e.id, e.type, e.created, clock_.NowUnix()));
        GPUWERK_ASSIGN_OR_RETURN(auto known, StripeCustomerTable::Find(tx, customer));
        if (!known || invoice_id.empty()) return std::string("ignored");
        GPUWERK_ASSIGN_OR_RETURN(
            bool newer, StripeEventLedger::Advance(tx, "invoice:" + invoice_id, e.created, e.id,
                                                   /*wins_ties=*/paid));
        if (!newer) return std::string("stale");
        if (paid) {
          GPUWERK_ASSIGN_OR_RETURN(bool ended, PaymentHoldTable::Delete(tx, invoice_id));
          if (ended) {
            GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                           {.action = "billing.payment_hold_end",
                                            .target = known->billing_account_id,
                                            .source_address = "stripe",
                                            .detail = {{"invoice", invoice_id}, {"event", e.id}}}));
          }
          return std::string("applied");
        }
        GPUWERK_TRY(PaymentHoldTable::Put(tx, {.provider_ref = invoice_id,
                                               .billing_account_id = known->billing_account_id,
                                               .reason = "payment_failed",
                                               .created_at = clock_.NowUnix()}));
        GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                       {.action = "billing.payment_hold",
                                        .target = known->billing_account_id,
                                        .source_address = "stripe",
                                        .detail = {{"invoice", invoice_id}, {"event", e.id}}}));
        GPUWERK_ASSIGN_OR_RETURN(AccountOwners owners,
                                 options_.owners(tx, known->billing_account_id));
        for (const std::string& to : owners.emails) {
          GPUWERK_TRY(outbox_.Enqueue(
              tx, PaymentFailedMail(to, invoice_id, owners.team_name, options_.public_url)));
          mailed = true;
        }
        if (owners.emails.empty()) {
          spdlog::warn("billing: no owner address for billing account {}: no payment-failed mail",
                       core::BoundedPrintable(known->billing_account_id));
        }
        return std::string("applied");
      }));
  if (mailed && options_.mail_queued) options_.mail_queued();
  if (paid && result == "applied") methods_.NotifyCardAdded();
  return result;
}

core::Result<std::string> StripeWebhooks::CustomerDeleted(const Event& e) {
  const std::string customer = Str(e.object, "id");
  return db_.Write([&](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(bool seen, AlreadySeen(tx, e.id));
    if (seen) return std::string("duplicate");
    GPUWERK_TRY(StripeEventLedger::Record(tx, e.id, e.type, e.created, clock_.NowUnix()));
    GPUWERK_ASSIGN_OR_RETURN(bool marked,
                             StripeCustomerTable::MarkDeleted(tx, customer, clock_.NowUnix()));
    return std::string(marked ? "applied" : "ignored");
  });
}

}  // namespace gpuwerk::billing
