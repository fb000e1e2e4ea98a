#pragma once

// The minute and money arithmetic of billing (R-13, docs/billing.md), pure: no store, no clock
// (callers pass Unix seconds, so a test controls time completely). Thread-safe.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/money_text.h"

namespace gpuwerk::billing {

/// core::CurrencyExponent and core::FormatAmount (core/money_text.h), which the CLI shares.
using core::CurrencyExponent;
using core::FormatAmount;

/// Billed minutes of `seconds` of billed time: ceil(seconds / 60), at least 1 (a session of 0 s
/// is one minute; negative seconds count as 0).
int64_t BilledMinutes(int64_t seconds);

/// The amount of one invoice line in minor units: `price_minor_per_hour` × `minutes` / 60,
/// rounded once, half up (…,5 goes up). Both arguments ≥ 0 (negative ones count as 0); the
/// result saturates at INT64_MAX instead of overflowing.
int64_t LineAmountMinor(int64_t price_minor_per_hour, int64_t minutes);

/// The UTC calendar month holding `unix_seconds`: its first second (Unix seconds).
int64_t MonthStart(int64_t unix_seconds);
/// The first second of the UTC month after the one holding `unix_seconds`.
int64_t NextMonthStart(int64_t unix_seconds);
/// "YYYY-MM" of the UTC month holding `unix_seconds`.
std::string MonthLabel(int64_t unix_seconds);
/// The first second of month `label` ("YYYY-MM", 1970-01 … 9999-12). Errors: kInvalidArgument
/// invalid_month.
core::Result<int64_t> ParseMonth(std::string_view label);

/// A stretch of wall time that is billed, [from, to) in Unix seconds.
struct Segment {
  int64_t from = 0;
  int64_t to = 0;
  bool operator==(const Segment&) const = default;
};

/// Billed minutes in one UTC month.
struct MonthMinutes {
  int64_t month_start = 0;  ///< first second of the month (Unix seconds)
  int64_t minutes = 0;
  bool operator==(const MonthMinutes&) const = default;
};

/// How a session's billed minutes fall into UTC months. `segments`: the billed wall time,
/// sorted, not overlapping (empty or reversed ones are ignored). Minutes are counted along the
/// billed time from the first segment's start: minute k begins where 60·k billed seconds have
/// passed, and belongs to the month in which that wall-clock instant lies. So the total is
/// exactly BilledMinutes(billed seconds), every minute is in one month, none is negative. When no
/// second is billed the one minimum minute belongs to the month of `session_start`. Months with
/// no minute are left out; the result is in month order.
std::vector<MonthMinutes> SplitByMonth(int64_t session_start, std::span<const Segment> segments);

/// The first second (Unix seconds) of the day holding `unix_seconds` where days begin at midnight
/// of the fixed offset `utc_offset_seconds` from UTC (e.g. 7200 for UTC+02:00, -18000 for
/// UTC-05:00): every day is 86,400 s; a zone's daylight-saving change is not followed.
int64_t DayStart(int64_t unix_seconds, int64_t utc_offset_seconds);

/// Billed minutes in one day (DayStart's days).
struct DayMinutes {
  int64_t day_start = 0;  ///< first second of the day (Unix seconds)
  int64_t minutes = 0;
  bool operator==(const DayMinutes&) const = default;
};

/// SplitByMonth's rule with days of UTC offset `utc_offset_seconds` instead of UTC months: minute
/// k belongs to the day in which its first second lies, the total is exactly
/// BilledMinutes(billed seconds), a session with no billed second has its one minute on the day
/// it started. Days with no minute are left out; in day order.
std::vector<DayMinutes> SplitByDay(int64_t session_start, std::span<const Segment> segments,
                                   int64_t utc_offset_seconds);

/// Σ(price_minor_per_hour × minutes) of several sessions, in minor units: rounded once, half up
/// (floor((x + 30) / 60)), as LineAmountMinor rounds one line; 0 for x ≤ 0; saturating. What a
/// day of usage costs (billing::UsageHistory::Daily), rounded once per day and currency.
int64_t AmountOfPriceMinutes(int64_t price_minutes);

/// A container time as the engine reports it (RFC 3339 in UTC, "Z" or "+00:00", an optional
/// fraction that is dropped) in Unix seconds; nullopt for anything else, and for Docker's "never"
/// (year 1).
std::optional<int64_t> ParseEngineTime(std::string_view text);

}  // namespace gpuwerk::billing
