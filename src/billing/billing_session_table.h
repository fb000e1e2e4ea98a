#pragma once

// The `billing_sessions` table (migrations 2 and 13, R-13) and its unbilled gaps
// (`billing_gaps`): one instance's metered life, from launch to delete. The billing component
// owns both; the scheduler opens and ends sessions through this class inside its own
// transactions (docs/billing.md).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "billing/money.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// A billing session. Price and currency are copied from the GPU type at launch and never change
/// afterwards (a later price change applies to sessions opened after it).
struct BillingSessionRow {
  std::string id;  ///< "bil_…"
  std::string instance_id;
  std::string person_id;           ///< who launched it
  std::string billing_account_id;  ///< who pays (SoloBillingAccountId, or a team)
  std::string instance_name;
  std::string gpu_type;
  int64_t price_minor_per_hour = 0;  ///< minor units of `currency` per hour
  std::string currency;              ///< ISO 4217 code as the GPU type has it, e.g. "usd"
  int64_t started_at = 0;            ///< Unix seconds
  std::optional<int64_t> ended_at;   ///< Unix seconds; nullopt while active
  /// The last evidence that the instance could run (Unix seconds): the last sync of its node 0's
  /// host while the session was open (started_at until the first). docs/billing.md "Evidence".
  int64_t evidence_at = 0;
  /// Node 0's container start time (as the engine sent it) at `evidence_at`; "" before the first
  /// report of one.
  std::string evidence_container_started;
};

/// A session with its unbilled gaps (in time order).
struct SessionWithGaps {
  BillingSessionRow session;
  std::vector<Segment> gaps;
};

/// Where a session sits in a person's usage history: (started_at, id), the keyset order.
struct SessionKey {
  int64_t started_at = 0;  ///< Unix seconds
  std::string id;
  bool operator==(const SessionKey&) const = default;
};

/// The `billing_sessions` and `billing_gaps` tables' SQL, inside the caller's transaction; errors
/// are the store's.
class BillingSessionTable {
 public:
  BillingSessionTable() = delete;

  /// Opens a session; `evidence_at` is set to `started_at` when it is 0.
  static core::Result<void> Insert(store::Transaction& tx, BillingSessionRow row);
  /// Ends session `id` at `now` unless it has ended already.
  static core::Result<void> End(store::Transaction& tx, const std::string& id, int64_t now);
  /// When session `id` started (Unix seconds); nullopt when there is no such session.
  static core::Result<std::optional<int64_t>> StartedAt(store::Transaction& tx,
                                                        const std::string& id);
  /// Session `id`; nullopt when there is none.
  static core::Result<std::optional<BillingSessionRow>> Find(store::Transaction& tx,
                                                             const std::string& id);
  /// Stores the evidence of session `id` (BillingSessionRow::evidence_at, …).
  static core::Result<void> SetEvidence(store::Transaction& tx, const std::string& id,
                                        int64_t evidence_at, const std::string& container_started);
  /// Records an unbilled gap [gap.from, gap.to) of session `id` (ignored when empty).
  static core::Result<void> AddGap(store::Transaction& tx, const std::string& id, Segment gap);
  /// The unbilled gaps of session `id`, in time order.
  static core::Result<std::vector<Segment>> Gaps(store::Transaction& tx, const std::string& id);
  /// Moves the open (not ended) sessions of `person_id` billed to `from_account_id` to
  /// `to_account_id` (R-15: a team's creator's running instances are billed to the team from its
  /// start, once: the whole session moves, never split). Returns how many moved.
  static core::Result<int64_t> MoveOpen(store::Transaction& tx, const std::string& person_id,
                                        const std::string& from_account_id,
                                        const std::string& to_account_id);

  /// Every session with billed time possibly in [from, to) (Unix seconds): started before `to`
  /// and not ended before `from`, with their gaps (two queries, whatever the count: the month
  /// close's read). In (billing_account_id, started_at, id) order.
  static core::Result<std::vector<SessionWithGaps>> ListOverlapping(store::Transaction& tx,
                                                                    int64_t from, int64_t to);
  /// ListOverlapping for the sessions billed to `account_id` only, read through the
  /// (billing_account_id, started_at, id) index: what one account's running total reads.
  static core::Result<std::vector<SessionWithGaps>> ListOverlappingOfAccount(
      store::Transaction& tx, const std::string& account_id, int64_t from, int64_t to);

  /// ListOverlapping for the sessions launched by `person_id` only (whichever account pays), read
  /// through the (person_id, started_at, id) index: what a person's daily usage reads. In
  /// (started_at, id) order.
  static core::Result<std::vector<SessionWithGaps>> ListOverlappingOfPerson(
      store::Transaction& tx, const std::string& person_id, int64_t from, int64_t to);

  /// Up to `limit` sessions launched by `person_id`, newest first ((started_at, id) descending),
  /// with their gaps: those strictly older than `before` when given, else strictly newer than
  /// `after` when given (the `limit` nearest to it), else the newest. Keyset paging: rows added
  /// meanwhile never shift a page (docs/billing.md "Usage history").
  static core::Result<std::vector<SessionWithGaps>> PageOfPerson(store::Transaction& tx,
                                                                 const std::string& person_id,
                                                                 std::optional<SessionKey> before,
                                                                 std::optional<SessionKey> after,
                                                                 int64_t limit);
  /// How many sessions `person_id` launched; with `newer_than`, only those strictly newer.
  static core::Result<int64_t> CountOfPerson(store::Transaction& tx, const std::string& person_id,
                                             std::optional<SessionKey> newer_than = std::nullopt);
};

}  // namespace gpuwerk::billing
