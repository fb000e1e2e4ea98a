#pragma once

// The teams side of billing (R-15, docs/teams.md "Billing"): which account pays for a person, and
// what moves to a team's account when it is created. Billing does not link teams; app/ installs
// these (billing::ResolveAccount, teams::TeamHooks::team_created).

#include <cstdint>
#include <string>
#include <string_view>

#include "billing/billing_account.h"
#include "billing/payment_methods.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::teams {

/// A billing::ResolveAccount: the account of the team `person_id` is an active member of (its id
/// is the team's id, its name the team's name, `may_manage` for owners only), else their solo
/// account (billing::SoloAccountOf). Reads only, through `tx`. Errors: not_found (no such
/// person); the store's.
core::Result<billing::BillingAccount> TeamBillingAccountOf(store::Transaction& tx,
                                                           const std::string& person_id);

/// What moved to a new team's account from its creator's solo account.
struct SoloTakeover {
  int64_t sessions_moved = 0;  ///< open billing sessions now billed to the team
};

/// A teams::TeamHooks::team_created step: moves `owner_id`'s open billing sessions, whole, to
/// team `team_id`'s account (each is billed once, to the team; ended sessions stay on the solo
/// account's invoices). A payment method is never moved between billing accounts: the creator's
/// card stays on their solo account (a Stripe card belongs to that account's Stripe customer),
/// and the team starts without one (docs/teams.md "Billing"). Audited `billing.move_to_team`
/// (actor `owner_id`, target the team) when a session moved. Inside the caller's transaction.
/// Errors: the store's.
core::Result<SoloTakeover> MoveSoloBillingToTeam(store::Transaction& tx, core::Clock& clock,
                                                 core::Rng& rng, const std::string& team_id,
                                                 const std::string& owner_id);

/// The team an operator names in `gpuwerk admin billing set-card|clear-card TEAM` (docs/teams.md
/// "Billing"): its id ("team_…", tried first) or its exact name, as the card holder of the
/// team's billing account (person id ""). Reads only, through `tx`. Errors: kNotFound
/// "team_not_found" naming `ref`; the store's.
core::Result<billing::PaymentMethods::CardHolder> TeamCardHolder(store::Transaction& tx,
                                                                 std::string_view ref);

}  // namespace gpuwerk::teams
