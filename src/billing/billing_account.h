#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "billing/billing_account_id.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// Who a billing account is: one person on their own, or a team.
enum class AccountKind { kSolo, kTeam };

/// "solo" or "team": the label the API and the CLI show.
std::string_view ToString(AccountKind kind);

/// The account that pays for a person's launches and holds at most one payment method
/// (docs/billing.md "Billing accounts").
struct BillingAccount {
  /// Stable id. A solo account's id is derived from its person's: SoloBillingAccountId
  /// (billing_account_id.h: "solo_" + the person id, e.g. "solo_per_…"); a team account's is the
  /// team's id.
  std::string id;
  AccountKind kind = AccountKind::kSolo;
  /// For people: a solo account's person's email; a team's name.
  std::string name;
  /// Whether the person it was resolved for may add, change or remove its payment method (a
  /// solo account's person may; a team's member may not, its owner may: R-15).
  bool may_manage = true;
};

/// Which billing account pays for person `person_id` now, read in the caller's transaction.
/// Billing does not know about teams: app/ installs the teams module's resolver (a team member
/// resolves to the team's account), and SoloAccountOf is the default. Must be quick (it runs
/// inside launch, restart and queue drain transactions) and only read through `tx`.
/// Errors: not_found (no such person); the store's.
using ResolveAccount = std::function<core::Result<BillingAccount>(store::Transaction& tx,
                                                                  const std::string& person_id)>;

/// The default ResolveAccount: every person pays on their own solo account, named by their
/// email. Errors: not_found (no such person); the store's.
core::Result<BillingAccount> SoloAccountOf(store::Transaction& tx, const std::string& person_id);

/// Who owns a billing account, as a payment-failed mail and the payment_failed answer name them.
struct AccountOwners {
  /// The owners' email addresses: a solo account's person; every active owner of a team. Empty
  /// when none is known.
  std::vector<std::string> emails;
  /// The team's name for a team's account ("" for a solo account): the mail names it.
  std::string team_name;
};

/// Whoever owns billing account `billing_account_id`, read in the caller's transaction.
using AccountOwnersOf = std::function<core::Result<AccountOwners>(
    store::Transaction& tx, const std::string& billing_account_id)>;

}  // namespace gpuwerk::billing
