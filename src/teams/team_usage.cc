#include "teams/team_usage.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "auth/person_table.h"
#include "billing/money.h"
#include "teams/team_member_table.h"
#include "teams/team_table.h"

namespace gpuwerk::teams {

core::Result<TeamUsage> TeamUsageOf(store::Database& db, core::Clock& clock,
                                    billing::Invoices& invoices, const auth::Principal& who,
                                    std::string_view month) {
  int64_t month_start = billing::MonthStart(clock.NowUnix());
  if (!month.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(month_start, billing::ParseMonth(month));
  }
  return db.Read([&](store::Transaction& tx) -> core::Result<TeamUsage> {
    GPUWERK_ASSIGN_OR_RETURN(auto me, TeamMemberTable::ActiveOf(tx, who.person_id));
    if (!me) {
      return core::Fail(core::ErrorCode::kNotFound, "no_team",
                        "You are in no team. Create one with 'gpuwerk team create NAME' (POST "
                        "/api/v1/team), or accept an invitation mailed to you.");
    }
    if (me->role != Role::kOwner) {
      return core::Fail(core::ErrorCode::kPermissionDenied, "owner_only",
                        "Only the team's owners may see its usage by member; your own usage is "
                        "in 'gpuwerk usage sessions'.");
    }
    GPUWERK_ASSIGN_OR_RETURN(auto team, TeamTable::Find(tx, me->team_id));
    GPUWERK_ASSIGN_OR_RETURN(billing::AccountMonth m,
                             invoices.AccountMonthOf(tx, me->team_id, month_start));
    TeamUsage out{.team_id = me->team_id,
                  .team_name = team ? team->name : "",
                  .month = m.month,
                  .closed = m.closed,
                  .as_of = m.as_of,
                  .totals = billing::TotalsOf(m.invoices)};
    GPUWERK_ASSIGN_OR_RETURN(auto active, TeamMemberTable::ListActive(tx, me->team_id));
    std::set<std::string> members;
    for (const MembershipRow& r : active) members.insert(r.person_id);
    // (person, currency) → minutes, amount.
    std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> sums;
    for (const billing::InvoiceRow& inv : m.invoices) {
      for (const billing::InvoiceLineRow& l : inv.lines) {
        auto& s = sums[{l.person_id, inv.currency}];
        s.first += l.minutes;
        s.second += l.amount_minor;
      }
    }
    for (const auto& [key, s] : sums) {
      GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, key.first));
      out.people.push_back({.person_id = key.first,
                            .label = email ? *email : "deleted account " + key.first,
                            .member = members.contains(key.first),
                            .minutes = s.first,
                            .amount_minor = s.second,
                            .currency = key.second});
    }
    std::sort(out.people.begin(), out.people.end(), [](const PersonUsage& a, const PersonUsage& b) {
      return std::tie(a.label, a.currency, a.person_id) <
             std::tie(b.label, b.currency, b.person_id);
    });
    return out;
  });
}

}  // namespace gpuwerk::teams
