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

 private:
  store::Database& db_;
  core::Clock& clock_;
  int64_t silent_after_;
};

}  // namespace gpuwerk::billing
