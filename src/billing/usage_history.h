#pragma once

// A person's billing sessions as their usage history shows them (R-16, docs/billing.md "Usage
// history"): 15 rows a page, newest first, keyset paging so pages hold still while rows arrive.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "billing/billing_session_table.h"
#include "core/clock.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// Rows per page of the usage history.
inline constexpr int64_t kUsagePageSize = 15;

/// One row: a billing session and what it costs (the sum of its invoice lines; so far while it
/// is active).
struct UsageRow {
  BillingSessionRow session;
  bool active = false;           ///< not ended yet
  int64_t duration_seconds = 0;  ///< wall time from start to end (or now while active)
  int64_t billed_seconds = 0;    ///< of that, billed on evidence (metering.h)
  int64_t minutes = 0;           ///< BilledMinutes(billed_seconds)
  int64_t amount_minor = 0;      ///< minor units of session.currency, each month rounded once
};

/// One page and the cursors to its neighbours ("" when there is none).
struct UsagePage {
  std::vector<UsageRow> rows;
  int64_t page = 1;         ///< this page's number from the newest (1-based), as of this read
  int64_t pages = 0;        ///< ceil(total / kUsagePageSize)
  int64_t total = 0;        ///< the person's sessions
  std::string next_cursor;  ///< older rows: pass as `before`
  std::string prev_cursor;  ///< newer rows: pass as `after`
};

/// A cursor's text: "<started_at>.<session id>".
std::string FormatCursor(const SessionKey& key);
/// Parses FormatCursor's text. Errors: kInvalidArgument invalid_cursor.
core::Result<SessionKey> ParseCursor(std::string_view text);

/// The most days Daily answers (about three months).
inline constexpr int64_t kMaxUsageDays = 92;
/// The farthest UTC offset a day may have, in seconds (UTC-14:00 … UTC+14:00).
inline constexpr int64_t kMaxUtcOffsetSeconds = 14 * 3600;

/// One currency's cost of a day.
struct DayAmount {
  std::string currency;
  int64_t amount_minor = 0;  ///< AmountOfPriceMinutes of the day's Σ price × minutes
};

/// One day of a person's usage (DayStart's days at the asked offset).
struct UsageDay {
  int64_t day_start = 0;  ///< Unix seconds
  int64_t minutes = 0;    ///< billed minutes that begin that day (SplitByDay), every currency
  std::vector<DayAmount> amounts;  ///< by currency, in currency order; empty on a day of none
};

/// The usage history. Thread-safe; references outlive it.
class UsageHistory {
 public:
  /// `silent_after`: as Invoices'.
  UsageHistory(store::Database& db, core::Clock& clock, int64_t silent_after);

  /// The page of `person_id`'s sessions older than cursor `before`, else newer than cursor
  /// `after` (the nearest kUsagePageSize), else the newest. Errors: invalid_cursor (both given,
  /// or one malformed); the store's.
  core::Result<UsagePage> Sessions(const std::string& person_id, std::string_view before,
                                   std::string_view after);

  /// `person_id`'s billed minutes and cost per day over the last `days` days, today (the day
  /// holding now) the last, oldest first, with days beginning at midnight of UTC offset
  /// `utc_offset_seconds` (docs/billing.md "Usage by day"). Every session the person launched
  /// counts, whichever account pays, as the usage history lists them; minutes follow SplitByDay
  /// on the billed segments (live sessions up to their evidence), and a day's cost per currency
  /// is rounded once for the day, so days may differ from invoice lines (rounded once per line)
  /// by a few minor units. Every day of the range is present, also one with nothing. Errors:
  /// kInvalidArgument invalid_days (outside 1 … kMaxUsageDays), invalid_utc_offset (beyond
  /// ±kMaxUtcOffsetSeconds); the store's.
  core::Result<std::vector<UsageDay>> Daily(const std::string& person_id, int64_t days,
                                            int64_t utc_offset_seconds);

 private:
  store::Database& db_;
  core::Clock& clock_;
  int64_t silent_after_;
};

}  // namespace gpuwerk::billing
