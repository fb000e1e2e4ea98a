#pragma once

// A team's usage by person for its owners (R-15, docs/teams.md "Usage by member"): per-person
// totals of one UTC month that add up exactly to the team's invoices for that month (closed) or
// to its running total (open), removed members and deleted accounts included.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "auth/principal.h"
#include "billing/invoices.h"
#include "core/clock.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::teams {

/// One person's share of the team's month in one currency.
struct PersonUsage {
  std::string person_id;
  /// Stable label: the person's email, or "deleted account <person id>" when the account is gone.
  std::string label;
  bool member = false;       ///< still an active member of the team
  int64_t minutes = 0;       ///< the sum of their invoice lines' minutes
  int64_t amount_minor = 0;  ///< the sum of their invoice lines' amounts (minor units)
  std::string currency;      ///< ISO 4217 code, e.g. "usd"
};

/// The team's month by person.
struct TeamUsage {
  std::string team_id;
  std::string team_name;
  std::string month;                           ///< "YYYY-MM" (UTC)
  bool closed = false;                         ///< the month's invoices exist (else running)
  int64_t as_of = 0;                           ///< Unix seconds
  std::vector<PersonUsage> people;             ///< by label, then currency
  std::vector<billing::CurrencyTotal> totals;  ///< the team's, by currency: the sums of `people`
};

/// The usage of the team `who` owns in UTC month `month` ("YYYY-MM"; "" the current month at
/// `clock`'s now), from `invoices` (Invoices::AccountMonthOf on the team's account: the stored
/// invoices of a closed month, the running lines of an open one). One row per person and currency
/// with a line billed to the team. Read-only. Errors: kNotFound no_team (not in a team);
/// kPermissionDenied owner_only (a member); kInvalidArgument invalid_month; the store's.
core::Result<TeamUsage> TeamUsageOf(store::Database& db, core::Clock& clock,
                                    billing::Invoices& invoices, const auth::Principal& who,
                                    std::string_view month);

}  // namespace gpuwerk::teams
