#include "store/leader_lease.h"

#include <string>

#include "core/strings.h"

namespace gpuwerk::store {
namespace {

constexpr std::string_view kNotLeader = "not_leader";

}  // namespace

LeaseClock DatabaseClock(std::string_view backend) {
  // SQL that differs between the engines stays in store/ (docs/database.md).
  const char* sql =
      backend == "postgresql"
          ? "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) AS now_ms"
          : "SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) AS now_ms";
  return [sql](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
    if (!row) return core::Internal("the database's clock answered no row");
    return row->Int("now_ms");
  };
}

core::Error NotLeaderError(std::string message) {
  return core::Error(core::ErrorCode::kFailedPrecondition, std::string(kNotLeader),
                     std::move(message));
}

// The one place that sets this code (NotLeaderError) is this file: comparing its label here is
// comparing the type (core::ErrorReason is kept to the store's connection-level reasons).
bool IsNotLeader(const core::Error& error) {
  return error.code == core::ErrorCode::kFailedPrecondition && error.api_code == kNotLeader;
}

core::Result<LeaseState> LeaderLease::Read(Transaction& tx, const LeaseClock& clock,
                                           std::string_view name) {
  LeaseState out;
  GPUWERK_ASSIGN_OR_RETURN(out.now_ms, clock(tx));
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT holder, epoch, expires_at_ms "
                                                 "FROM leader_leases WHERE name = ?",
                                                 {std::string(name)}));
  if (!row) return out;
  out.holder = row->Text("holder");
  out.epoch = row->Int("epoch");
  out.expires_at_ms = row->Int("expires_at_ms");
  return out;
}

core::Result<std::vector<LeaderLease::Held>> LeaderLease::Unexpired(Transaction& tx,
                                                                    const LeaseClock& clock,
                                                                    bool has_table) {
  std::vector<Held> held;
  if (!has_table) return held;
  GPUWERK_ASSIGN_OR_RETURN(const int64_t now_ms, clock(tx));
  GPUWERK_ASSIGN_OR_RETURN(auto rows, tx.Query("SELECT name, holder, epoch, expires_at_ms "
                                               "FROM leader_leases WHERE expires_at_ms > ? "
                                               "ORDER BY name",
                                               {now_ms}));
  for (const Row& row : rows) {
    held.push_back(Held{.name = row.Text("name"),
                        .state = LeaseState{.holder = row.Text("holder"),
                                            .epoch = row.Int("epoch"),
                                            .expires_at_ms = row.Int("expires_at_ms"),
                                            .now_ms = now_ms}});
  }
  return held;
}

core::Result<LeaseState> LeaderLease::Acquire(Transaction& tx, const LeaseClock& clock,
                                              std::string_view name, std::string_view holder,
                                              int64_t held_epoch, int64_t ttl_ms) {
  GPUWERK_ASSIGN_OR_RETURN(LeaseState now, Read(tx, clock, name));
  const std::string lease(name), who(holder);
  const int64_t until = now.now_ms + ttl_ms;
  if (now.epoch == 0) {
    GPUWERK_ASSIGN_OR_RETURN(
        int64_t made,
        tx.Exec("INSERT INTO leader_leases (name, holder, epoch, expires_at_ms, acquired_at_ms, "
                "renewed_at_ms) VALUES (?, ?, 1, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                {lease, who, until, now.now_ms, now.now_ms}));
    if (made == 0) return now;  // another replica made it first: theirs
    return LeaseState{.holder = who, .epoch = 1, .expires_at_ms = until, .now_ms = now.now_ms};
  }
  if (now.HeldBy(who) && now.epoch == held_epoch) {
    GPUWERK_TRY(
        tx.Exec("UPDATE leader_leases SET expires_at_ms = ?, renewed_at_ms = ? "
                "WHERE name = ? AND holder = ? AND epoch = ?",
                {until, now.now_ms, lease, who, now.epoch}));
    now.expires_at_ms = until;
    return now;
  }
  // Another holder's, still running.
  if (now.now_ms < now.expires_at_ms && now.holder != who) return now;
  // Run out (whoever held it), or this replica's own from an earlier process: a takeover, under a
  // new epoch that fences the old holder.
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t taken,
      tx.Exec("UPDATE leader_leases SET holder = ?, epoch = epoch + 1, expires_at_ms = ?, "
              "acquired_at_ms = ?, renewed_at_ms = ? WHERE name = ? AND epoch = ?",
              {who, until, now.now_ms, now.now_ms, lease, now.epoch}));
  if (taken == 0) return now;
  return LeaseState{
      .holder = who, .epoch = now.epoch + 1, .expires_at_ms = until, .now_ms = now.now_ms};
}

core::Result<void> LeaderLease::Check(Transaction& tx, const LeaseClock& clock,
                                      std::string_view name, std::string_view holder,
                                      int64_t epoch) {
  GPUWERK_ASSIGN_OR_RETURN(LeaseState now, Read(tx, clock, name));
  if (now.HeldBy(holder) && now.epoch == epoch) return {};
  if (now.epoch != epoch) {
    return core::Fail(NotLeaderError("this server's " + std::string(name) + " lease (epoch " +
                                     std::to_string(epoch) + ") was taken over: the lease is at " +
                                     "epoch " + std::to_string(now.epoch)));
  }
  return core::Fail(NotLeaderError("this server's " + std::string(name) + " lease (epoch " +
                                   std::to_string(epoch) + ") has run out"));
}

core::Result<bool> LeaderLease::Release(Transaction& tx, std::string_view name,
                                        std::string_view holder, int64_t epoch) {
  GPUWERK_ASSIGN_OR_RETURN(int64_t changed,
                           tx.Exec("UPDATE leader_leases SET expires_at_ms = 0 "
                                   "WHERE name = ? AND holder = ? AND epoch = ?",
                                   {std::string(name), std::string(holder), epoch}));
  return changed > 0;
}

}  // namespace gpuwerk::store
