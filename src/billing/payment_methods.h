#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "auth/rate_limiter.h"
#include "billing/billing_account.h"
#include "billing/payment_hold_table.h"
#include "billing/payment_method_table.h"
#include "billing/payment_provider.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// A card as an operator records it under the manual provider (validated: ValidateCard).
struct CardFacts {
  std::string brand;      ///< lowercase letters, 1..24, e.g. "visa"
  std::string last4;      ///< exactly 4 ASCII digits
  int64_t exp_month = 0;  ///< 1..12
  int64_t exp_year = 0;   ///< 2000..2199
};

/// Checks what an operator typed for a card, nothing stored on error. `now` (Unix seconds)
/// decides whether the expiry is past (a card is good through the last day of its expiry
/// month, UTC). Errors (kInvalidArgument, details.field names the field): invalid_brand,
/// invalid_last4, invalid_exp_month, invalid_exp_year; card_expired.
core::Result<CardFacts> ValidateCard(CardFacts facts, int64_t now);

/// A person's billing as GET /api/v1/billing shows it.
struct BillingState {
  BillingAccount account;
  std::string provider;                 ///< PaymentProvider::name()
  std::optional<PaymentMethod> method;  ///< nullopt when none is on file
  std::string method_description;       ///< PaymentProvider::Describe; "" when none
  /// The oldest payment hold of the account (an invoice whose payment failed: launches and
  /// restarts answer 402 payment_failed); nullopt when none.
  std::optional<PaymentHold> hold;
  /// When the account is a team's: the person's own (solo) account's method, which stays theirs
  /// (a card is never moved between accounts) and pays again once they are in no team; nullopt
  /// otherwise or when none.
  std::optional<PaymentMethod> own_method;
  std::string own_method_description;  ///< PaymentProvider::Describe; "" when none
  /// When the account is a team's: the oldest payment hold of the person's own (solo) account,
  /// which refuses their launches and restarts in the team too; nullopt otherwise or when none.
  std::optional<PaymentHold> own_hold;
};

/// How many card setups one person may begin: 20 an hour (each is two requests to the
/// provider, and a deployment shares one rate limit at Stripe).
inline constexpr auth::RateRule kCardSetupsPerPerson{
    .scope = "card_setup_person", .limit = 20, .window = std::chrono::hours(1)};
/// How many card setups may be begun for one billing account (a team's owners together): 40 an
/// hour.
inline constexpr auth::RateRule kCardSetupsPerAccount{
    .scope = "card_setup_account", .limit = 40, .window = std::chrono::hours(1)};

/// Payment methods and the launch gate (R-14, docs/billing.md): which billing account pays for
/// a person (through the installed ResolveAccount), what is on file for it, the operator's
/// records under the manual provider, a person's card setup and removal. Every change is audited
/// in its transaction. Thread-safe (state lives in the store); references outlive it.
class PaymentMethods {
 public:
  /// `resolve` (default SoloAccountOf) says which account pays for a person; `card_added`
  /// (optional) is called after a commit that put a method on an account, outside any
  /// transaction (app/ drains the queues: a passed-over entry launches as soon as its owner has
  /// a card, R-14).
  PaymentMethods(store::Database& db, core::Clock& clock, core::Rng& rng, PaymentProvider& provider,
                 ResolveAccount resolve = {}, std::function<void()> card_added = {});

  /// The provider in use.
  PaymentProvider& provider() { return provider_; }

  /// Which account pays for `person_id`, in the caller's transaction. Errors: the resolver's.
  core::Result<BillingAccount> AccountOf(store::Transaction& tx,
                                         const std::string& person_id) const;

  /// Whether `person_id`'s billing account has a payment method now, in the caller's
  /// transaction (the queue drain's eligibility). Errors: the resolver's; the store's.
  core::Result<bool> HasPaymentMethod(store::Transaction& tx, const std::string& person_id) const;

  /// The launch and restart gate, in the caller's write transaction: nothing when
  /// `person_id`'s billing account has a payment method and no payment hold, else
  /// kPaymentRequired (402) `payment_method_required` whose message says what to do
  /// (PaymentProvider::HowToAddPaymentMethod), or `payment_failed` while an invoice's payment
  /// failed (PaymentHoldTable; the message names the invoice and what lifts the hold: to the
  /// account's manager, paying it or adding a card, which is charged for it at once; to a team
  /// member, asking the team's owners, named by email); `action` ("launch", "restart") names what
  /// was refused. Errors: those; the resolver's; the store's.
  core::Result<void> RequireForLaunch(store::Transaction& tx, const std::string& person_id,
                                      std::string_view action) const;

  /// `person_id`'s billing: the account, the provider, the method on file. Errors: not_found
  /// (no such person); the store's.
  core::Result<BillingState> State(const std::string& person_id);

  /// Starts a card setup for `person_id`'s account (PaymentProvider::BeginCardSetup) and records
  /// who began it for which account (CardSetupTable), so that its completion is applied only
  /// while that person still manages the account (MayManage) and the card was not changed here
  /// since. Errors: kPermissionDenied `billing_managed_by_team` for a person who does not manage
  /// the account (a team member); kResourceExhausted `rate_limited` (details.retry_after_seconds)
  /// past kCardSetupsPerPerson or kCardSetupsPerAccount, nothing asked of the provider; the
  /// provider's (`manual_provider`); not_found; the store's.
  core::Result<CardSetup> BeginCardSetup(const std::string& person_id);

  /// Whether `person_id` may put a card on `billing_account_id` now, in the caller's
  /// transaction: their own solo account always; another account only when it is the one that
  /// pays for them now and they manage it (a team's current owner). A person who no longer
  /// exists may not. Errors: the resolver's other than not_found; the store's.
  core::Result<bool> MayManage(store::Transaction& tx, const std::string& person_id,
                               const std::string& billing_account_id) const;

  /// Fails with kPaymentRequired (402) `payment_failed` (details: billing_account, invoice,
  /// provider; the message begins with `refused`) while `person_id`'s own solo account has a
  /// payment hold, in the caller's transaction: a person whose own invoice is unpaid neither
  /// launches in a team nor makes or joins one. Errors: that; the store's.
  core::Result<void> RequireNoOwnHold(store::Transaction& tx, const std::string& person_id,
                                      std::string_view refused) const;

  /// Removes the payment method of `person_id`'s account (the provider detaches it first:
  /// Stripe's POST /v1/payment_methods/{pm}/detach). Running instances keep running and billing;
  /// new launches and restarts are refused until a method is on file again. Audited
  /// `billing.payment_method_remove` (not again when the provider's own word that it was
  /// detached removed it meanwhile). Errors: kPermissionDenied `billing_managed_by_team`;
  /// not_found (no method on file); kFailedPrecondition `payment_method_changed` (another method
  /// arrived meanwhile: it stays); the provider's (provider_unavailable, stripe_error); the
  /// store's.
  core::Result<PaymentMethod> Remove(const std::string& person_id,
                                     const std::string& source_address);
  /// As Remove, for `person_id`'s own solo account whichever account pays for them now (a team
  /// member's own card, shown as `own_payment_method`, which stays theirs). Errors: Remove's
  /// but billing_managed_by_team.
  core::Result<PaymentMethod> RemoveOwn(const std::string& person_id,
                                        const std::string& source_address);

  /// Whose card the operator sets or clears: the billing account, and the person the operator
  /// named ("" when they named the account itself, e.g. a team).
  struct CardHolder {
    std::string person_id;
    BillingAccount account;
  };
  /// Finds the holder inside the card change's transaction, reading only through it. Errors: its
  /// own (not_found, …), returned as they are with nothing changed.
  using FindCardHolder = std::function<core::Result<CardHolder>(store::Transaction& tx)>;

  /// As SetCard, for the billing account `find` names (the teams module's team form: `gpuwerk
  /// admin billing set-card TEAM`). Audited `billing.set_card`, target the account.
  core::Result<PaymentMethod> SetCardOf(const std::string& actor_id, const FindCardHolder& find,
                                        const CardFacts& card, const std::string& source_address);
  /// As ClearCard, for the billing account `find` names. Audited `billing.clear_card`.
  core::Result<std::optional<PaymentMethod>> ClearCardOf(const std::string& actor_id,
                                                         const FindCardHolder& find,
                                                         const std::string& source_address);

  /// The operator records `card` as the manual payment method of the billing account that pays
  /// for the person with email `email` (replacing one on file; one the provider holds, Stripe's
  /// `pm_…`, is detached there first, as ClearCard does), audited `billing.set_card` with
  /// `actor_id` and `source_address`; wakes `card_added` after the commit. `actor_id` "" is the
  /// system (`gpuwerk up`). Errors: invalid_email; not_found (no such person);
  /// kFailedPrecondition `billing_managed_by_team` (the person is a member of a team they do not
  /// own: the operator names an owner); ValidateCard's; `payment_method_changed` (replaced
  /// while the old one was being detached); the provider's (provider_unavailable: nothing
  /// changed); the store's. Nothing stored on error.
  core::Result<PaymentMethod> SetCard(const std::string& actor_id, std::string_view email,
                                      const CardFacts& card, const std::string& source_address);

  /// The operator removes the payment method of the account that pays for `email`'s person,
  /// audited `billing.clear_card` when one was there. Returns the removed method, nullopt when
  /// none was on file (nothing changed). A method the provider holds (Stripe's `pm_…`) is
  /// detached there first (PaymentProvider::Detach), as when a person removes it. Errors:
  /// invalid_email; not_found; kFailedPrecondition `billing_managed_by_team` (a team member's
  /// address: name an owner); `payment_method_changed` (replaced while it was being cleared); the
  /// provider's (provider_unavailable); the store's.
  core::Result<std::optional<PaymentMethod>> ClearCard(const std::string& actor_id,
                                                       std::string_view email,
                                                       const std::string& source_address);

  /// Installs who owns an account (app/: a team's active owners), so that a team member refused
  /// with 402 payment_failed is told whom to ask. Call before serving; default: nobody named.
  void SetAccountOwners(AccountOwnersOf owners) { owners_ = std::move(owners); }

  /// Tells the listener that a method was put on an account outside this class (a provider's
  /// webhook, after its commit).
  void NotifyCardAdded() const;

 private:
  /// The person with email `email` and the account that pays for them. Errors: invalid_email;
  /// not_found; the store's.
  core::Result<std::pair<std::string, BillingAccount>> AccountOfEmail(store::Transaction& tx,
                                                                      std::string_view email) const;
  /// Remove (`own` false: the account that pays for the person) and RemoveOwn (`own` true).
  core::Result<PaymentMethod> RemoveFrom(const std::string& person_id, bool own,
                                         const std::string& source_address);
  /// A FindCardHolder for AccountOfEmail (`email` must outlive the call it is passed to).
  FindCardHolder HolderOfEmail(std::string_view email) const;

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  PaymentProvider& provider_;
  ResolveAccount resolve_;
  std::function<void()> card_added_;
  AccountOwnersOf owners_;
};

}  // namespace gpuwerk::billing
