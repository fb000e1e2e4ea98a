// The leader lease and its fence (leader_lease.h, leader_elector.h) on every backend, on an
// injected lease clock and monotonic clock: a first take, a renewal, a takeover after expiry with
// a new epoch, and a paused old leader's write refused in its own transaction.
#include "store/leader_lease.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "store/leader_elector.h"
#include "tests/support/postgres_server.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::store {
namespace {

using testing::TestBackend;

constexpr int64_t kTtl = 10'000;

class LeaderLeaseTest : public ::testing::TestWithParam<TestBackend> {
 protected:
  void SetUp() override {
    if (GetParam() == TestBackend::kPostgres) {
      if (auto why = testing::PostgresUnavailable()) GTEST_SKIP() << *why;
    }
    ASSERT_TRUE(db_.Open());
    ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.ExecScript("CREATE TABLE fenced_writes (n BIGINT NOT NULL)"));
      return {};
    }));
  }

  /// The lease clock tests move: Unix ms.
  LeaseClock Clock() {
    return [this](Transaction&) -> core::Result<int64_t> { return now_ms_.load(); };
  }
  /// Acquire as a process that holds `held_epoch` (0: none yet); remembers what it got.
  core::Result<LeaseState> Acquire(const std::string& holder) {
    int64_t& held = held_[holder];
    auto got = db_->Write([&](Transaction& tx) {
      return LeaderLease::Acquire(tx, Clock(), "scheduler", holder, held, kTtl);
    });
    if (got && got->HeldBy(holder)) held = got->epoch;
    return got;
  }
  core::Result<void> Check(const std::string& holder, int64_t epoch) {
    return db_->Read([&](Transaction& tx) {
      return LeaderLease::Check(tx, Clock(), "scheduler", holder, epoch);
    });
  }
  LeaderElectorOptions ElectorOptions(const std::string& holder, std::atomic<int64_t>& steady) {
    return {.name = "scheduler",
            .holder = holder,
            .lease = std::chrono::milliseconds(kTtl),
            .renew_every = std::chrono::milliseconds(kTtl / 3),
            .clock = Clock(),
            .steady_ms = [&steady] { return steady.load(); },
            .on_gain = {}};
  }
  int64_t FencedRows() {
    auto n = db_->Read([](Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM fenced_writes"));
      return row->Int("n");
    });
    EXPECT_TRUE(n) << n.error().message;
    return n.value_or(-1);
  }

  testing::TempDatabase db_{GetParam()};
  std::atomic<int64_t> now_ms_{1'800'000'000'000};
  std::map<std::string, int64_t> held_;
};

INSTANTIATE_TEST_SUITE_P(Backends, LeaderLeaseTest,
                         ::testing::Values(TestBackend::kSqlite, TestBackend::kPostgres),
                         [](const auto& info) { return testing::BackendName(info.param); });

TEST_P(LeaderLeaseTest, TheFirstTakerHoldsEpochOneAndARenewalKeepsTheEpoch) {
  auto first = Acquire("a");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->HeldBy("a"));
  EXPECT_EQ(first->epoch, 1);
  EXPECT_EQ(first->expires_at_ms, now_ms_ + kTtl);

  now_ms_ += kTtl / 2;
  auto renewed = Acquire("a");
  ASSERT_TRUE(renewed) << renewed.error().message;
  EXPECT_TRUE(renewed->HeldBy("a"));
  EXPECT_EQ(renewed->epoch, 1);
  EXPECT_EQ(renewed->expires_at_ms, now_ms_ + kTtl);
  EXPECT_TRUE(Check("a", 1));
}

TEST_P(LeaderLeaseTest, AnotherReplicaWaitsForTheExpiryThenTakesOverUnderANewEpoch) {
  ASSERT_TRUE(Acquire("a"));
  now_ms_ += kTtl - 1;
  auto early = Acquire("b");
  ASSERT_TRUE(early) << early.error().message;
  EXPECT_FALSE(early->HeldBy("b"));
  EXPECT_EQ(early->holder, "a");

  now_ms_ += 1;  // a's lease has run out
  auto taken = Acquire("b");
  ASSERT_TRUE(taken) << taken.error().message;
  EXPECT_TRUE(taken->HeldBy("b"));
  EXPECT_EQ(taken->epoch, 2);

  // The old holder's epoch is refused, and so is its renewal.
  auto stale = Check("a", 1);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().api_code, "not_leader");
  EXPECT_TRUE(IsNotLeader(stale.error()));
  auto back = Acquire("a");
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->HeldBy("a"));
  EXPECT_TRUE(Check("b", 2));
}

TEST_P(LeaderLeaseTest, AHolderWhoseLeaseRanOutIsRefusedUntilItTakesItAgainUnderANewEpoch) {
  ASSERT_TRUE(Acquire("a"));
  now_ms_ += kTtl;
  auto expired = Check("a", 1);
  ASSERT_FALSE(expired);
  EXPECT_TRUE(IsNotLeader(expired.error()));
  auto again = Acquire("a");
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->HeldBy("a"));
  EXPECT_EQ(again->epoch, 2);
}

TEST_P(LeaderLeaseTest, ARestartedReplicaTakesItsOwnLeaseBackAtOnceUnderANewEpoch) {
  ASSERT_TRUE(Acquire("a"));
  held_.clear();  // the process died; the next one of replica a knows no epoch
  now_ms_ += 1;
  auto back = Acquire("a");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->HeldBy("a"));
  EXPECT_EQ(back->epoch, 2);
  auto stale = Check("a", 1);
  ASSERT_FALSE(stale);
  EXPECT_TRUE(IsNotLeader(stale.error()));
}

TEST_P(LeaderLeaseTest, APausedOldLeadersFencedWriteIsRefusedAndChangesNothing) {
  std::atomic<int64_t> steady_a{0}, steady_b{0};
  LeaderElector a(*db_, ElectorOptions("replica-a", steady_a));
  LeaderElector b(*db_, ElectorOptions("replica-b", steady_b));
  FencedDatabase fenced_a(*db_, a);
  auto write = [](Database& db) {
    return db.Write([](Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.Exec("INSERT INTO fenced_writes (n) VALUES (1)"));
      return {};
    });
  };

  auto a_leads = a.Step();
  ASSERT_TRUE(a_leads) << a_leads.error().message;
  EXPECT_TRUE(*a_leads);
  ASSERT_TRUE(write(fenced_a));
  EXPECT_EQ(FencedRows(), 1);
  auto b_waits = b.Step();
  ASSERT_TRUE(b_waits);
  EXPECT_FALSE(*b_waits);

  // a is paused: its own monotonic clock stands still (it still believes it leads), the lease
  // runs out on the database's clock, and b takes over.
  now_ms_ += kTtl + 1;
  auto b_leads = b.Step();
  ASSERT_TRUE(b_leads);
  EXPECT_TRUE(*b_leads);
  EXPECT_EQ(b.epoch(), 2);
  EXPECT_TRUE(a.Holding());

  auto refused = write(fenced_a);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "not_leader");
  EXPECT_EQ(FencedRows(), 1);
  EXPECT_EQ(a.fence_refused_total(), 1);
  EXPECT_EQ(a.fence_passed_total(), 1);

  // Resumed, a learns that it lost at its next round, and refuses without asking the database.
  auto a_again = a.Step();
  ASSERT_TRUE(a_again);
  EXPECT_FALSE(*a_again);
  EXPECT_FALSE(a.Holding());
  EXPECT_FALSE(write(fenced_a));
  FencedDatabase fenced_b(*db_, b);
  EXPECT_TRUE(write(fenced_b));
  EXPECT_EQ(FencedRows(), 2);
}

TEST_P(LeaderLeaseTest, HoldingEndsOnTheLocalClockBeforeTheLeaseRunsOut) {
  std::atomic<int64_t> steady{0};
  LeaderElector a(*db_, ElectorOptions("replica-a", steady));
  ASSERT_TRUE(a.Step());
  steady += kTtl - 1;
  EXPECT_TRUE(a.Holding());
  steady += 1;
  EXPECT_FALSE(a.Holding());
  FencedDatabase fenced(*db_, a);
  auto refused = fenced.Write([](Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.Exec("INSERT INTO fenced_writes (n) VALUES (1)"));
    return {};
  });
  ASSERT_FALSE(refused);
  EXPECT_TRUE(IsNotLeader(refused.error()));
}

TEST_P(LeaderLeaseTest, AStoppedLeaderGivesTheLeaseUpAtOnceOnTheDatabasesClock) {
  // The database's own clock (DatabaseClock), as the server runs it.
  LeaderElector a(*db_, {.name = "scheduler", .holder = "replica-a"});
  LeaderElector b(*db_, {.name = "scheduler", .holder = "replica-b"});
  auto a_leads = a.Step();
  ASSERT_TRUE(a_leads) << a_leads.error().message;
  EXPECT_TRUE(*a_leads);
  auto b_waits = b.Step();
  ASSERT_TRUE(b_waits);
  EXPECT_FALSE(*b_waits);
  a.Stop();
  EXPECT_FALSE(a.Holding());
  auto b_leads = b.Step();
  ASSERT_TRUE(b_leads);
  EXPECT_TRUE(*b_leads);
  EXPECT_EQ(b.epoch(), 2);
}

}  // namespace
}  // namespace gpuwerk::store
