#include "billing/usage_history.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <map>

#include "billing/charges.h"
#include "billing/metering.h"

namespace gpuwerk::billing {
namespace {

core::Error BadCursor() {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_cursor",
                     "The cursor is not one this server gave: use the next or prev cursor of a "
                     "page as it came, or leave both out for the newest page.");
}

}  // namespace

std::string FormatCursor(const SessionKey& key) {
  return std::to_string(key.started_at) + "." + key.id;
}

core::Result<SessionKey> ParseCursor(std::string_view text) {
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 19 || text.size() - dot - 1 > 64 ||
      dot + 1 == text.size()) {
    return core::Fail(BadCursor());
  }
  SessionKey key;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + dot, key.started_at);
  if (ec != std::errc() || ptr != text.data() + dot || key.started_at < 0) {
    return core::Fail(BadCursor());
  }
  key.id = std::string(text.substr(dot + 1));
  for (char c : key.id) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return core::Fail(BadCursor());
    }
  }
  return key;
}

UsageHistory::UsageHistory(store::Database& db, core::Clock& clock, int64_t silent_after)
    : db_(db), clock_(clock), silent_after_(silent_after) {}

core::Result<UsagePage> UsageHistory::Sessions(const std::string& person_id,
                                               std::string_view before, std::string_view after) {
  if (!before.empty() && !after.empty()) return core::Fail(BadCursor());
  std::optional<SessionKey> before_key, after_key;
  if (!before.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(before_key, ParseCursor(before));
  }
  if (!after.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(after_key, ParseCursor(after));
  }
  return db_.Read([&](store::Transaction& tx) -> core::Result<UsagePage> {
    const int64_t now = clock_.NowUnix();
    UsagePage page;
    GPUWERK_ASSIGN_OR_RETURN(
        auto sessions,
        BillingSessionTable::PageOfPerson(tx, person_id, before_key, after_key, kUsagePageSize));
    // A `prev` past the newest row that is short of a page: show the newest page instead, so a
    // page is always full while there are enough rows.
    if (after_key && static_cast<int64_t>(sessions.size()) < kUsagePageSize) {
      GPUWERK_ASSIGN_OR_RETURN(
          sessions, BillingSessionTable::PageOfPerson(tx, person_id, std::nullopt, std::nullopt,
                                                      kUsagePageSize));
    }
    GPUWERK_ASSIGN_OR_RETURN(page.total, BillingSessionTable::CountOfPerson(tx, person_id));
    page.pages = (page.total + kUsagePageSize - 1) / kUsagePageSize;
    for (SessionWithGaps& s : sessions) {
      UsageRow row;
      row.active = !s.session.ended_at.has_value();
      const int64_t end = s.session.ended_at.value_or(now);
      row.duration_seconds = std::max<int64_t>(0, end - s.session.started_at);
      const SessionTotal total = TotalOf(s.session, s.gaps, now, silent_after_);
      row.billed_seconds = total.billed_seconds;
      row.minutes = total.minutes;
      row.amount_minor = total.amount_minor;
      row.session = std::move(s.session);
      page.rows.push_back(std::move(row));
    }
    if (page.rows.empty()) return page;
    const SessionKey first{.started_at = page.rows.front().session.started_at,
                           .id = page.rows.front().session.id};
    const SessionKey last{.started_at = page.rows.back().session.started_at,
                          .id = page.rows.back().session.id};
    GPUWERK_ASSIGN_OR_RETURN(const int64_t newer,
                             BillingSessionTable::CountOfPerson(tx, person_id, first));
    page.page = newer / kUsagePageSize + 1;
    if (newer > 0) page.prev_cursor = FormatCursor(first);
    GPUWERK_ASSIGN_OR_RETURN(const int64_t newer_than_last,
                             BillingSessionTable::CountOfPerson(tx, person_id, last));
    if (newer_than_last + 1 < page.total) page.next_cursor = FormatCursor(last);
    return page;
  });
}

core::Result<std::vector<UsageDay>> UsageHistory::Daily(const std::string& person_id, int64_t days,
                                                        int64_t utc_offset_seconds) {
  if (days < 1 || days > kMaxUsageDays) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "invalid_days",
                      "Ask for 1 to " + std::to_string(kMaxUsageDays) + " days.");
  }
  if (utc_offset_seconds < -kMaxUtcOffsetSeconds || utc_offset_seconds > kMaxUtcOffsetSeconds) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "invalid_utc_offset",
                      "The UTC offset must lie between -14:00 and +14:00 (-840 to 840 minutes).");
  }
  constexpr int64_t kDay = 86400;
  return db_.Read([&](store::Transaction& tx) -> core::Result<std::vector<UsageDay>> {
    const int64_t now = clock_.NowUnix();
    const int64_t first = DayStart(now, utc_offset_seconds) - (days - 1) * kDay;
    const int64_t end = first + days * kDay;
    std::vector<UsageDay> out(static_cast<size_t>(days));
    for (int64_t i = 0; i < days; ++i) out[static_cast<size_t>(i)].day_start = first + i * kDay;
    // Σ price × minutes per day and currency, rounded once per day at the end.
    std::vector<std::map<std::string, int64_t>> price_minutes(static_cast<size_t>(days));
    GPUWERK_ASSIGN_OR_RETURN(
        auto sessions, BillingSessionTable::ListOverlappingOfPerson(tx, person_id, first, end));
    for (const SessionWithGaps& s : sessions) {
      const std::vector<Segment> segments = BilledSegments(s.session, s.gaps, now, silent_after_);
      for (const DayMinutes& d : SplitByDay(s.session.started_at, segments, utc_offset_seconds)) {
        if (d.day_start < first || d.day_start >= end) continue;
        const auto i = static_cast<size_t>((d.day_start - first) / kDay);
        out[i].minutes += d.minutes;
        int64_t& sum = price_minutes[i][s.session.currency];
        int64_t add = 0;
        if (__builtin_mul_overflow(std::max<int64_t>(s.session.price_minor_per_hour, 0), d.minutes,
                                   &add) ||
            __builtin_add_overflow(sum, add, &sum)) {
          sum = std::numeric_limits<int64_t>::max();  // saturate, as LineAmountMinor does
        }
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      for (const auto& [currency, sum] : price_minutes[i]) {
        out[i].amounts.push_back({.currency = currency, .amount_minor = AmountOfPriceMinutes(sum)});
      }
    }
    return out;
  });
}

}  // namespace gpuwerk::billing
