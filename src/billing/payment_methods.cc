#include "billing/payment_methods.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "audit/audit_log.h"
#include "auth/email_address.h"
#include "auth/person_table.h"
#include "auth/rate_limiter.h"
#include "billing/card_setup_table.h"
#include "billing/manual_provider.h"
#include "billing/payment_hold_table.h"

namespace gpuwerk::billing {
namespace {

core::Error FieldError(std::string code, std::string message, std::string_view field) {
  return core::Error(core::ErrorCode::kInvalidArgument, std::move(code), std::move(message))
      .WithDetail("field", std::string(field));
}

core::Error NotManager() {
  return core::Error(core::ErrorCode::kPermissionDenied, "billing_managed_by_team",
                     "Your team's owner manages its payment method.");
}

nlohmann::json CardDetail(const PaymentMethod& m) {
  return {{"provider", m.provider},
          {"brand", m.brand},
          {"last4", m.last4},
          {"exp_month", m.exp_month},
          {"exp_year", m.exp_year}};
}

}  // namespace

core::Result<CardFacts> ValidateCard(CardFacts f, int64_t now) {
  const bool brand_ok =
      !f.brand.empty() && f.brand.size() <= 24 &&
      std::all_of(f.brand.begin(), f.brand.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  if (!brand_ok) {
    return core::Fail(FieldError("invalid_brand",
                                 "brand must be 1 to 24 lowercase letters, e.g. visa, mastercard, "
                                 "amex.",
                                 "brand"));
  }
  const bool last4_ok =
      f.last4.size() == 4 &&
      std::all_of(f.last4.begin(), f.last4.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!last4_ok) {
    return core::Fail(FieldError(
        "invalid_last4", "last4 must be the card number's last 4 digits, e.g. 4242.", "last4"));
  }
  if (f.exp_month < 1 || f.exp_month > 12) {
    return core::Fail(
        FieldError("invalid_exp_month", "exp_month must be a month, 1 to 12.", "exp_month"));
  }
  if (f.exp_year < 2000 || f.exp_year > 2199) {
    return core::Fail(FieldError("invalid_exp_year",
                                 "exp_year must be the expiry's four-digit year, e.g. 2030.",
                                 "exp_year"));
  }
  // Good through the last day of its expiry month (UTC).
  using namespace std::chrono;
  const year_month_day today{floor<days>(sys_seconds{seconds{now}})};
  const int this_month = static_cast<int>(today.year()) * 12 +
                         static_cast<int>(static_cast<unsigned>(today.month())) - 1;
  const int64_t expiry_month = f.exp_year * 12 + f.exp_month - 1;
  if (expiry_month < this_month) {
    return core::Fail(FieldError(
        "card_expired",
        fmt::format("A card that expired in {:02}/{} cannot be recorded.", f.exp_month, f.exp_year),
        "exp_year"));
  }
  return f;
}

PaymentMethods::PaymentMethods(store::Database& db, core::Clock& clock, core::Rng& rng,
                               PaymentProvider& provider, ResolveAccount resolve,
                               std::function<void()> card_added)
    : db_(db),
      clock_(clock),
      rng_(rng),
      provider_(provider),
      resolve_(resolve ? std::move(resolve) : ResolveAccount(&SoloAccountOf)),
      card_added_(std::move(card_added)) {}

core::Result<BillingAccount> PaymentMethods::AccountOf(store::Transaction& tx,
                                                       const std::string& person_id) const {
  return resolve_(tx, person_id);
}

core::Result<bool> PaymentMethods::HasPaymentMethod(store::Transaction& tx,
                                                    const std::string& person_id) const {
  GPUWERK_ASSIGN_OR_RETURN(BillingAccount account, resolve_(tx, person_id));
  return PaymentMethodTable::Exists(tx, account.id);
}

core::Result<void> PaymentMethods::RequireForLaunch(store::Transaction& tx,
                                                    const std::string& person_id,
                                                    std::string_view action) const {
  GPUWERK_ASSIGN_OR_RETURN(BillingAccount account, resolve_(tx, person_id));
  const std::string what = action == "restart" ? "Restarting an instance" : "Launching an instance";
  if (account.kind != AccountKind::kSolo) {
    // A failed payment of the person's own account follows them into a team: making or joining
    // one never lets anyone launch around their own unpaid invoice.
    GPUWERK_TRY(RequireNoOwnHold(tx, person_id, what + " is refused"));
  }
  GPUWERK_ASSIGN_OR_RETURN(bool on_file, PaymentMethodTable::Exists(tx, account.id));
  if (on_file) {
    GPUWERK_ASSIGN_OR_RETURN(auto holds, PaymentHoldTable::Of(tx, account.id));
    if (holds.empty()) return {};
    std::string message;
    if (account.may_manage) {
      message = what + " is refused: the payment of invoice " + holds.front().provider_ref +
                " of your billing account failed. Pay it from the link in the payment "
                "provider's mail about it, or add a card ('gpuwerk billing add-card'): a new "
                "card is charged for that invoice at once, and launches are possible again as "
                "soon as it is paid.";
    } else {
      std::string whom = "your team's owner";
      if (owners_) {
        GPUWERK_ASSIGN_OR_RETURN(AccountOwners owners, owners_(tx, account.id));
        if (!owners.emails.empty()) {
          whom += " (";
          for (size_t i = 0; i < owners.emails.size(); ++i) {
            if (i > 0) whom += ", ";
            whom += owners.emails[i];
          }
          whom += ")";
        }
      }
      message = what + " is refused: the payment of invoice " + holds.front().provider_ref +
                " of your team's billing account failed. Only the team's owners can settle it: "
                "ask " +
                whom + " to pay it or add a card.";
    }
    return core::Fail(core::Error(core::ErrorCode::kPaymentRequired, "payment_failed", message)
                          .WithDetail("billing_account", account.id)
                          .WithDetail("invoice", holds.front().provider_ref)
                          .WithDetail("provider", std::string(provider_.name())));
  }
  return core::Fail(
      core::Error(core::ErrorCode::kPaymentRequired, "payment_method_required",
                  what + " needs a payment method on your billing account, and it has none. " +
                      provider_.HowToAddPaymentMethod(account.may_manage))
          .WithDetail("billing_account", account.id)
          .WithDetail("provider", std::string(provider_.name())));
}

core::Result<BillingState> PaymentMethods::State(const std::string& person_id) {
  return db_.Read([&](store::Transaction& tx) -> core::Result<BillingState> {
    BillingState out;
    GPUWERK_ASSIGN_OR_RETURN(out.account, resolve_(tx, person_id));
    out.provider = std::string(provider_.name());
    GPUWERK_ASSIGN_OR_RETURN(out.method, PaymentMethodTable::Find(tx, out.account.id));
    if (out.method) out.method_description = provider_.Describe(*out.method);
    GPUWERK_ASSIGN_OR_RETURN(auto holds, PaymentHoldTable::Of(tx, out.account.id));
    if (!holds.empty()) out.hold = holds.front();
    if (out.account.kind != AccountKind::kSolo) {
      GPUWERK_ASSIGN_OR_RETURN(out.own_method,
                               PaymentMethodTable::Find(tx, SoloBillingAccountId(person_id)));
      if (out.own_method) out.own_method_description = provider_.Describe(*out.own_method);
      GPUWERK_ASSIGN_OR_RETURN(auto own_holds,
                               PaymentHoldTable::Of(tx, SoloBillingAccountId(person_id)));
      if (!own_holds.empty()) out.own_hold = own_holds.front();
    }
    return out;
  });
}

core::Result<CardSetup> PaymentMethods::BeginCardSetup(const std::string& person_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      CardSetupRequest request,
      db_.Read([&](store::Transaction& tx) -> core::Result<CardSetupRequest> {
        GPUWERK_ASSIGN_OR_RETURN(BillingAccount account, resolve_(tx, person_id));
        GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, person_id));
        if (!email) return core::NotFound("Person");
        return CardSetupRequest{
            .account = std::move(account), .person_id = person_id, .email = std::move(*email)};
      }));
  if (!request.account.may_manage) return core::Fail(NotManager());
  // Each setup is two requests to the provider (Stripe: the customer, the Checkout Session), and
  // the deployment shares one rate limit there: counted per person and per account before any.
  auth::RateLimiter limiter(clock_);
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    const std::pair<const auth::RateRule*, const std::string*> rules[] = {
        {&kCardSetupsPerPerson, &person_id}, {&kCardSetupsPerAccount, &request.account.id}};
    for (const auto& [rule, subject] : rules) {
      GPUWERK_ASSIGN_OR_RETURN(auto retry, limiter.RetryAfter(tx, *rule, *subject));
      if (retry) {
        return core::Fail(auth::RateLimiter::Limited(
            "Too many card setups were started for this billing account; open the last page "
            "you were given, or try again later.",
            *retry));
      }
    }
    for (const auto& [rule, subject] : rules) GPUWERK_TRY(limiter.Record(tx, *rule, *subject));
    return {};
  }));
  GPUWERK_ASSIGN_OR_RETURN(CardSetup setup, provider_.BeginCardSetup(request));
  if (!setup.provider_ref.empty()) {
    // Who began it, for which account: its completion is checked against this
    // (docs/billing.md "Card setups").
    GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
      return CardSetupTable::Insert(tx, {.provider_ref = setup.provider_ref,
                                         .billing_account_id = request.account.id,
                                         .person_id = person_id,
                                         .created_at = clock_.NowUnix()});
    }));
  }
  return setup;
}

core::Result<void> PaymentMethods::RequireNoOwnHold(store::Transaction& tx,
                                                    const std::string& person_id,
                                                    std::string_view refused) const {
  GPUWERK_ASSIGN_OR_RETURN(auto holds, PaymentHoldTable::Of(tx, SoloBillingAccountId(person_id)));
  if (holds.empty()) return {};
  return core::Fail(
      core::Error(core::ErrorCode::kPaymentRequired, "payment_failed",
                  std::string(refused) + ": the payment of invoice " + holds.front().provider_ref +
                      " of your own billing account failed. Pay it from the link in the payment "
                      "provider's mail about it; until it is paid you launch nothing, alone or "
                      "in a team.")
          .WithDetail("billing_account", SoloBillingAccountId(person_id))
          .WithDetail("invoice", holds.front().provider_ref)
          .WithDetail("provider", std::string(provider_.name())));
}

core::Result<bool> PaymentMethods::MayManage(store::Transaction& tx, const std::string& person_id,
                                             const std::string& billing_account_id) const {
  if (billing_account_id == SoloBillingAccountId(person_id)) return true;
  auto account = resolve_(tx, person_id);
  if (!account) {
    if (account.error().code == core::ErrorCode::kNotFound) return false;  // the person is gone
    return core::Fail(account.error());
  }
  return account->id == billing_account_id && account->may_manage;
}

core::Result<PaymentMethod> PaymentMethods::Remove(const std::string& person_id,
                                                   const std::string& source_address) {
  return RemoveFrom(person_id, /*own=*/false, source_address);
}

core::Result<PaymentMethod> PaymentMethods::RemoveOwn(const std::string& person_id,
                                                      const std::string& source_address) {
  return RemoveFrom(person_id, /*own=*/true, source_address);
}

core::Result<PaymentMethod> PaymentMethods::RemoveFrom(const std::string& person_id, bool own,
                                                       const std::string& source_address) {
  using Found = std::pair<BillingAccount, PaymentMethod>;
  GPUWERK_ASSIGN_OR_RETURN(
      Found found, db_.Read([&](store::Transaction& tx) -> core::Result<Found> {
        GPUWERK_ASSIGN_OR_RETURN(BillingAccount account, resolve_(tx, person_id));
        if (own && account.kind != AccountKind::kSolo) {
          // Their own card, which stays theirs while they bill to a team.
          account = BillingAccount{.id = SoloBillingAccountId(person_id),
                                   .kind = AccountKind::kSolo,
                                   .name = "",
                                   .may_manage = true};
        }
        if (!account.may_manage) return core::Fail(NotManager());
        GPUWERK_ASSIGN_OR_RETURN(auto method, PaymentMethodTable::Find(tx, account.id));
        if (!method) return core::NotFound("Payment method");
        return Found{std::move(account), std::move(*method)};
      }));
  // The provider first (network, outside any transaction): a method still attached there but
  // forgotten here would go on being charged.
  GPUWERK_TRY(provider_.Detach(found.first, found.second));
  GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto now_on_file, PaymentMethodTable::Find(tx, found.first.id));
    // Forgotten meanwhile (the provider's own word that it was detached came first, and was
    // audited then): removed all the same.
    if (!now_on_file) return {};
    // Replaced meanwhile (a new card arrived): the new one stays.
    if (now_on_file->updated_at != found.second.updated_at ||
        now_on_file->provider_ref != found.second.provider_ref) {
      return core::Fail(core::ErrorCode::kFailedPrecondition, "payment_method_changed",
                        "Your payment method changed while it was being removed; look at it "
                        "again ('gpuwerk billing') and try again.");
    }
    GPUWERK_TRY(PaymentMethodTable::Delete(tx, found.first.id));
    GPUWERK_TRY(CardSetupTable::VoidOpen(tx, found.first.id));
    return audit::RecordAudit(tx, clock_, rng_,
                              {.actor_id = person_id,
                               .action = "billing.payment_method_remove",
                               .target = found.first.id,
                               .source_address = source_address,
                               .detail = CardDetail(found.second)});
  }));
  return found.second;
}

core::Result<std::pair<std::string, BillingAccount>> PaymentMethods::AccountOfEmail(
    store::Transaction& tx, std::string_view email) const {
  GPUWERK_ASSIGN_OR_RETURN(auth::EmailAddress address, auth::ParseEmailAddress(email));
  GPUWERK_ASSIGN_OR_RETURN(auto person, auth::PersonTable::FindByEmail(tx, address.normalised));
  if (!person) return core::NotFound("Person");
  GPUWERK_ASSIGN_OR_RETURN(BillingAccount account, resolve_(tx, person->person.id));
  if (!account.may_manage) {
    // A team member's address would reach the team's card: the operator names its owner, so
    // that nobody changes a team's card by naming one of its members.
    return core::Fail(core::Error(core::ErrorCode::kFailedPrecondition, "billing_managed_by_team",
                                  "That person pays through team \"" + account.name +
                                      "\", whose owner manages its payment method: name one of "
                                      "the team's owners instead.")
                          .WithDetail("billing_account", account.id));
  }
  return std::pair<std::string, BillingAccount>(person->person.id, std::move(account));
}

core::Result<PaymentMethod> PaymentMethods::SetCard(const std::string& actor_id,
                                                    std::string_view email, const CardFacts& card,
                                                    const std::string& source_address) {
  return SetCardOf(actor_id, HolderOfEmail(email), card, source_address);
}

core::Result<std::optional<PaymentMethod>> PaymentMethods::ClearCard(
    const std::string& actor_id, std::string_view email, const std::string& source_address) {
  return ClearCardOf(actor_id, HolderOfEmail(email), source_address);
}

PaymentMethods::FindCardHolder PaymentMethods::HolderOfEmail(std::string_view email) const {
  return [this, email](store::Transaction& tx) -> core::Result<CardHolder> {
    GPUWERK_ASSIGN_OR_RETURN(auto who, AccountOfEmail(tx, email));
    return CardHolder{.person_id = who.first, .account = std::move(who.second)};
  };
}

core::Result<PaymentMethod> PaymentMethods::SetCardOf(const std::string& actor_id,
                                                      const FindCardHolder& find,
                                                      const CardFacts& card,
                                                      const std::string& source_address) {
  const int64_t now = clock_.NowUnix();
  GPUWERK_ASSIGN_OR_RETURN(CardFacts valid, ValidateCard(card, now));
  // A card the provider holds (added at Stripe) that this one replaces is detached there first,
  // as when it is cleared: one still attached there but forgotten here would go on being charged.
  using Held = std::optional<std::pair<BillingAccount, PaymentMethod>>;
  GPUWERK_ASSIGN_OR_RETURN(Held held, db_.Read([&](store::Transaction& tx) -> core::Result<Held> {
    GPUWERK_ASSIGN_OR_RETURN(CardHolder who, find(tx));
    GPUWERK_ASSIGN_OR_RETURN(auto method, PaymentMethodTable::Find(tx, who.account.id));
    if (!method || method->provider != provider_.name() ||
        method->provider == ManualProvider::kName) {
      return Held();
    }
    return Held(std::pair(std::move(who.account), std::move(*method)));
  }));
  if (held) GPUWERK_TRY(provider_.Detach(held->first, held->second));
  GPUWERK_ASSIGN_OR_RETURN(
      PaymentMethod stored, db_.Write([&](store::Transaction& tx) -> core::Result<PaymentMethod> {
        GPUWERK_ASSIGN_OR_RETURN(CardHolder who, find(tx));
        if (held) {
          GPUWERK_ASSIGN_OR_RETURN(auto method, PaymentMethodTable::Find(tx, who.account.id));
          if (method && (method->provider_ref != held->second.provider_ref ||
                         method->updated_at != held->second.updated_at)) {
            return core::Fail(core::ErrorCode::kFailedPrecondition, "payment_method_changed",
                              "The payment method changed while it was being replaced; look at "
                              "it again and try again.");
          }
        }
        PaymentMethod m{.billing_account_id = who.account.id,
                        .provider = std::string(ManualProvider::kName),
                        .brand = valid.brand,
                        .last4 = valid.last4,
                        .exp_month = valid.exp_month,
                        .exp_year = valid.exp_year,
                        .provider_ref = "",
                        .created_at = now,
                        .updated_at = now};
        GPUWERK_TRY(PaymentMethodTable::Upsert(tx, m));
        // A card setup begun before this change never overrides it (docs/billing.md "Card
        // setups").
        GPUWERK_TRY(CardSetupTable::VoidOpen(tx, who.account.id));
        nlohmann::json detail = CardDetail(m);
        if (!who.person_id.empty()) detail["person_id"] = who.person_id;
        GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                       {.actor_id = actor_id,
                                        .action = "billing.set_card",
                                        .target = who.account.id,
                                        .source_address = source_address,
                                        .detail = std::move(detail)}));
        GPUWERK_ASSIGN_OR_RETURN(auto after, PaymentMethodTable::Find(tx, who.account.id));
        return std::move(*after);
      }));
  NotifyCardAdded();
  return stored;
}

core::Result<std::optional<PaymentMethod>> PaymentMethods::ClearCardOf(
    const std::string& actor_id, const FindCardHolder& find, const std::string& source_address) {
  // A method the provider holds (a card added at Stripe) is detached there first (network,
  // outside any transaction): one still attached there but forgotten here would go on being
  // charged.
  using Held = std::optional<std::pair<BillingAccount, PaymentMethod>>;
  GPUWERK_ASSIGN_OR_RETURN(Held held, db_.Read([&](store::Transaction& tx) -> core::Result<Held> {
    GPUWERK_ASSIGN_OR_RETURN(CardHolder who, find(tx));
    GPUWERK_ASSIGN_OR_RETURN(auto method, PaymentMethodTable::Find(tx, who.account.id));
    if (!method || method->provider != provider_.name()) return Held();
    return Held(std::pair(std::move(who.account), std::move(*method)));
  }));
  if (held) GPUWERK_TRY(provider_.Detach(held->first, held->second));
  return db_.Write([&](store::Transaction& tx) -> core::Result<std::optional<PaymentMethod>> {
    GPUWERK_ASSIGN_OR_RETURN(CardHolder who, find(tx));
    GPUWERK_ASSIGN_OR_RETURN(auto method, PaymentMethodTable::Find(tx, who.account.id));
    if (!method) return std::optional<PaymentMethod>();
    if (held && (method->provider_ref != held->second.provider_ref ||
                 method->updated_at != held->second.updated_at)) {
      // Replaced meanwhile (a new card arrived): the new one stays, not detached.
      return core::Fail(core::ErrorCode::kFailedPrecondition, "payment_method_changed",
                        "The payment method changed while it was being cleared; look at it again "
                        "and try again.");
    }
    GPUWERK_TRY(PaymentMethodTable::Delete(tx, who.account.id));
    GPUWERK_TRY(CardSetupTable::VoidOpen(tx, who.account.id));
    nlohmann::json detail = CardDetail(*method);
    if (!who.person_id.empty()) detail["person_id"] = who.person_id;
    GPUWERK_TRY(audit::RecordAudit(tx, clock_, rng_,
                                   {.actor_id = actor_id,
                                    .action = "billing.clear_card",
                                    .target = who.account.id,
                                    .source_address = source_address,
                                    .detail = std::move(detail)}));
    return method;
  });
}

void PaymentMethods::NotifyCardAdded() const {
  if (card_added_) card_added_();
}

}  // namespace gpuwerk::billing
