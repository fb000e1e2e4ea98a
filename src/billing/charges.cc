#include "billing/charges.h"

#include "billing/metering.h"

namespace gpuwerk::billing {

std::vector<MonthCharge> SessionCharges(const BillingSessionRow& session,
                                        const std::vector<Segment>& gaps, int64_t now,
                                        int64_t silent_after) {
  const std::vector<Segment> segments = BilledSegments(session, gaps, now, silent_after);
  std::vector<MonthCharge> out;
  for (const MonthMinutes& m : SplitByMonth(session.started_at, segments)) {
    out.push_back({.month_start = m.month_start,
                   .minutes = m.minutes,
                   .amount_minor = LineAmountMinor(session.price_minor_per_hour, m.minutes)});
  }
  return out;
}

SessionTotal TotalOf(const BillingSessionRow& session, const std::vector<Segment>& gaps,
                     int64_t now, int64_t silent_after) {
  SessionTotal total;
  total.billed_seconds = BilledSeconds(BilledSegments(session, gaps, now, silent_after));
  for (const MonthCharge& c : SessionCharges(session, gaps, now, silent_after)) {
    total.minutes += c.minutes;
    total.amount_minor += c.amount_minor;
  }
  return total;
}

}  // namespace gpuwerk::billing
