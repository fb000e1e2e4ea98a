#pragma once

// What a billing session costs, month by month (R-13, docs/billing.md "Invoices"): the one
// computation that invoice lines, the usage history and the month close share, so a usage row
// and its invoice lines always agree to the minor unit. Pure; thread-safe.

#include <cstdint>
#include <vector>

#include "billing/billing_session_table.h"
#include "billing/money.h"

namespace gpuwerk::billing {

/// One session's share of one UTC month: what its invoice line for that month says.
struct MonthCharge {
  int64_t month_start = 0;  ///< first second of the month (Unix seconds)
  int64_t minutes = 0;      ///< billed minutes that begin in the month (SplitByMonth)
  /// LineAmountMinor(session price, minutes): minor units of the session's currency, rounded
  /// once for this line.
  int64_t amount_minor = 0;
  bool operator==(const MonthCharge&) const = default;
};

/// A session's charges as known at `now` (Unix seconds): BilledSegments (its gaps and the
/// evidence rule with `silent_after` seconds), split by UTC month, each month's amount at the
/// session's locked price. Months with no minute are left out; in month order. A session still
/// active is charged up to `now` (its amount so far).
std::vector<MonthCharge> SessionCharges(const BillingSessionRow& session,
                                        const std::vector<Segment>& gaps, int64_t now,
                                        int64_t silent_after);

/// The whole session's billed seconds, minutes and amount at `now`: seconds of its billed
/// segments, the sum of its months' minutes (= BilledMinutes(seconds)) and the sum of its months'
/// amounts (each rounded once, as its invoice lines are).
struct SessionTotal {
  int64_t billed_seconds = 0;
  int64_t minutes = 0;
  int64_t amount_minor = 0;
};
SessionTotal TotalOf(const BillingSessionRow& session, const std::vector<Segment>& gaps,
                     int64_t now, int64_t silent_after);

}  // namespace gpuwerk::billing
