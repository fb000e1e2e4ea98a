#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store {

/// A time source for leases: the current time in Unix milliseconds, read inside the transaction
/// `tx` (the database's clock: DatabaseClock), or injected by tests.
using LeaseClock = std::function<core::Result<int64_t>(Transaction& tx)>;

/// The database's own clock, in Unix milliseconds, read in `tx`: on PostgreSQL
/// `clock_timestamp()` (the time of the read, not of the transaction's start), on SQLite
/// `julianday('now')`. `backend` is Database::Backend(). Every replica sharing a database measures
/// leases on this one clock, so their own clocks' skew does not matter. Errors: the store's.
LeaseClock DatabaseClock(std::string_view backend);

/// A lease as the table holds it after an acquire or a read.
struct LeaseState {
  std::string holder;         ///< who holds (or last held) it; "" when no row exists yet
  int64_t epoch = 0;          ///< the fencing epoch: +1 at every takeover, 0 when no row exists
  int64_t expires_at_ms = 0;  ///< Unix ms on the lease clock; held while now < expires_at_ms
  int64_t now_ms = 0;         ///< the lease clock's time when this state was read
  /// Whether `who` holds the lease at now_ms.
  bool HeldBy(std::string_view who) const {
    return !holder.empty() && holder == who && now_ms < expires_at_ms;
  }
};

/// The leader leases (table `leader_leases`, migration 23; its one owner): one row per named lease
/// (the server's leader-only work uses "scheduler"), holding who holds it, until when, and its
/// fencing epoch. Leader election and fencing (docs/scale-out.md): a replica calls Acquire every
/// few seconds; leader-only writes call Check in their own transaction, which refuses a holder
/// whose epoch is no longer current or whose lease has run out, so a paused old leader cannot act
/// after a new one took over. All times are Unix milliseconds on `clock` (the database's, in the
/// server). Stateless; every call takes the caller's write (Acquire, Release) or any (Check, Read)
/// transaction. Correct against concurrent callers on PostgreSQL because write transactions are
/// SERIALIZABLE (a takeover and a leader-only write that checked the old epoch cannot both commit
/// out of order), and on SQLite because writers take turns.
class LeaderLease {
 public:
  /// Takes or renews lease `name` for `holder` for `ttl_ms` milliseconds from now: a missing row is
  /// created at epoch 1; `holder`'s own unexpired lease at `held_epoch` (the epoch this process
  /// took) is extended (same epoch); an expired lease (anyone's, `holder`'s own included) is taken
  /// over with epoch + 1, and so is `holder`'s own lease at another epoch (an earlier process of
  /// the same replica, gone: the server's data directory lock says so); another holder's
  /// unexpired lease is left alone. Returns the lease as it now is (HeldBy(holder) says whether it
  /// is `holder`'s). Call in a write transaction. Errors: the store's (a concurrent acquire on
  /// PostgreSQL is store_busy, which Database::Run retries).
  static core::Result<LeaseState> Acquire(Transaction& tx, const LeaseClock& clock,
                                          std::string_view name, std::string_view holder,
                                          int64_t held_epoch, int64_t ttl_ms);

  /// Succeeds when `holder` holds lease `name` at `epoch` and it has not run out on `clock`; else
  /// kFailedPrecondition "not_leader" (the message names the lease's current epoch). Call first in
  /// the transaction of a leader-only write, which then rolls back on the error. Errors: that, and
  /// the store's.
  static core::Result<void> Check(Transaction& tx, const LeaseClock& clock, std::string_view name,
                                  std::string_view holder, int64_t epoch);

  /// Gives lease `name` up at once (its expiry set to 0) when `holder` holds it at `epoch`, so that
  /// another replica takes over without waiting (a server stopping cleanly). Returns whether it
  /// did. Call in a write transaction. Errors: the store's.
  static core::Result<bool> Release(Transaction& tx, std::string_view name, std::string_view holder,
                                    int64_t epoch);

  /// The lease `name` as it is now on `clock` (holder "" and epoch 0 when never taken). Errors: the
  /// store's.
  static core::Result<LeaseState> Read(Transaction& tx, const LeaseClock& clock,
                                       std::string_view name);

  /// A lease that has not run out, by name (Unexpired).
  struct Held {
    std::string name;  ///< the lease's name ("scheduler")
    LeaseState state;  ///< its holder and expiry
  };
  /// Every lease, of any name, that has not run out on `clock`: a server holds it, so one runs on
  /// this database now (store::CopyDatabase refuses such a database). In name order. Empty, without
  /// a statement, when `has_table` is false (the table `leader_leases` does not exist: a database
  /// older than migration 23, or an empty one). Errors: the store's.
  static core::Result<std::vector<Held>> Unexpired(Transaction& tx, const LeaseClock& clock,
                                                   bool has_table);
};

/// The error Check returns: kFailedPrecondition, api code "not_leader".
core::Error NotLeaderError(std::string message);
/// Whether `error` is NotLeaderError's.
bool IsNotLeader(const core::Error& error);

}  // namespace gpuwerk::store
