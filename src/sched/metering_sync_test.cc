// Metering on evidence through the agent sync (R-13, docs/billing.md "Evidence"): the real
// scheduler, agent sync and billing against a real SQLite store, with a FakeClock. A host's agent
// reports every 10 s; the tests silence it, bring it back and read what the billing session bills.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "billing/billing_session_table.h"
#include "billing/charges.h"
#include "billing/invoices.h"
#include "core/time_format.h"
#include "sched/agent_sync.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/sched_store_test.h"

namespace gpuwerk::sched {
namespace {

using nlohmann::json;

constexpr const char* kRun1 = "2026-11-10T10:00:02.5Z";

class MeteringSyncTest : public SchedStoreTest {
 protected:
  void SetUp() override {
    SchedStoreTest::SetUp();
    if (HasFatalFailure()) return;
    clock_.Advance(std::chrono::seconds(core::ParseRfc3339("2026-11-10T10:00:00Z").value() -
                                        clock_.NowUnix()));
    options_.host_unknown_after_seconds = 30;
    hosts_ = std::make_unique<HostRegistry>(*db_, clock_, rng_);
    instances_ = std::make_unique<InstanceService>(*db_, clock_, rng_, options_);
    sync_ = std::make_unique<AgentSync>(*db_, clock_, rng_, options_);
    AddPerson("alice");
    AddKey("alice", "key_alice");
    auto h =
        hosts_->Add("op", "spark-a", "spark-1x", true, "127.0.0.1", SshRegistration{"10.0.0.5"});
    ASSERT_TRUE(h) << h.error().message;
    host_ = *hosts_->AuthenticateAgent(h->token);
    ASSERT_TRUE(hosts_->SetGpuType("op", "spark-1x",
                                   {.price_minor_per_hour = 65, .currency = "usd"}, "127.0.0.1"));
    Sync({});
    auto in = instances_->Create("alice", "alpha", "key_alice", "spark-1x", "127.0.0.1");
    ASSERT_TRUE(in) << in.error().api_code;
    instance_ = *in;
    start_ = clock_.NowUnix();
  }
  void TearDown() override {
    sync_.reset();
    instances_.reset();
    hosts_.reset();
    SchedStoreTest::TearDown();
  }
  void Sync(json containers) {
    auto r = sync_->Sync(host_, {{"agent_version", "0.1.0"},
                                 {"inventory", {{"addresses", {"10.0.0.5"}}}},
                                 {"engine", {{"ok", true}, {"error", ""}}},
                                 {"containers", containers}});
    ASSERT_TRUE(r) << r.error().message;
  }
  json Container(const std::string& started, const std::string& state = "running",
                 const std::string& finished = "0001-01-01T00:00:00Z") {
    return json::array({{{"instance_id", instance_.id},
                         {"node_index", 0},
                         {"container_id", "c1"},
                         {"state", state},
                         {"exit_code", 0},
                         {"started_at", started},
                         {"finished_at", finished},
                         {"ssh_port", 40123},
                         {"ssh_ready", state == "running"},
                         {"restart_generation", restart_generation_},
                         {"error", ""}}});
  }
  /// Reports `containers` every 10 s for `seconds`.
  void ReportFor(int64_t seconds, const std::function<json()>& containers) {
    for (int64_t t = 0; t < seconds; t += 10) {
      clock_.Advance(std::chrono::seconds(10));
      Sync(containers());
    }
  }
  void Silence(int64_t seconds) { clock_.Advance(std::chrono::seconds(seconds)); }
  billing::SessionTotal Billed() {
    auto total = db_->Read([&](store::Transaction& tx) -> core::Result<billing::SessionTotal> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto s, billing::BillingSessionTable::Find(tx, instance_.billing_session_id));
      GPUWERK_ASSIGN_OR_RETURN(
          auto gaps, billing::BillingSessionTable::Gaps(tx, instance_.billing_session_id));
      return billing::TotalOf(*s, gaps, clock_.NowUnix(), options_.host_unknown_after_seconds);
    });
    EXPECT_TRUE(total) << total.error().message;
    return total ? *total : billing::SessionTotal{};
  }
  void Delete() { ASSERT_TRUE(instances_->Delete("alice", instance_.id, "127.0.0.1")); }

  SchedOptions options_;
  std::unique_ptr<HostRegistry> hosts_;
  std::unique_ptr<InstanceService> instances_;
  std::unique_ptr<AgentSync> sync_;
  Host host_;
  Instance instance_;
  int64_t start_ = 0;
  int64_t restart_generation_ = 0;
};

TEST_F(MeteringSyncTest, SilentHostBackWithTheSameContainerBillsTheGap) {
  ReportFor(600, [&] { return Container(kRun1); });  // 10 minutes of reports
  Silence(1800);                                     // the agent was killed for 30 minutes
  EXPECT_EQ(Billed().billed_seconds, 600);           // while silent: up to the last sighting
  Sync(Container(kRun1));                            // back: the same run kept going
  EXPECT_EQ(Billed().billed_seconds, 2400);
  ReportFor(60, [&] { return Container(kRun1); });
  Delete();
  EXPECT_EQ(Billed().billed_seconds, 2460);
  EXPECT_EQ(Billed().minutes, 41);
  clock_.Advance(std::chrono::hours(2));  // ended: nothing more
  EXPECT_EQ(Billed().minutes, 41);
}

TEST_F(MeteringSyncTest, SilentHostBackWithANewContainerStartIsBilledToTheOldRunsFinish) {
  ReportFor(600, [&] { return Container(kRun1); });  // reports until 10:10:00
  Silence(1800);                                     // the host rebooted: back at 10:40:00
  // The old run finished at 10:12:00, the new one started at 10:38:00.
  Sync(Container("2026-11-10T10:38:00Z", "running", "2026-11-10T10:12:00Z"));
  // Billed 10:00 → 10:12 and 10:38 → 10:40.
  EXPECT_EQ(Billed().billed_seconds, 720 + 120);
  ReportFor(60, [&] { return Container("2026-11-10T10:38:00Z"); });
  Delete();
  EXPECT_EQ(Billed().billed_seconds, 720 + 180);
  EXPECT_EQ(Billed().minutes, 15);
}

TEST_F(MeteringSyncTest, AStoppedContainerIsBilledUpToItsFinishTime) {
  ReportFor(600, [&] { return Container(kRun1); });
  Silence(1800);
  // Same run, but it stopped at 10:15:00 during the silence.
  Sync(Container(kRun1, "exited", "2026-11-10T10:15:00Z"));
  EXPECT_EQ(Billed().billed_seconds, 900);
}

TEST_F(MeteringSyncTest, AHostThatNeverReturnsIsBilledToItsLastSighting) {
  ReportFor(600, [&] { return Container(kRun1); });
  Silence(7200);
  EXPECT_EQ(Billed().billed_seconds, 600);
  Delete();  // the person gives up on it two hours later
  clock_.Advance(std::chrono::hours(24));
  EXPECT_EQ(Billed().billed_seconds, 600);
  EXPECT_EQ(Billed().minutes, 10);
  // The month's invoice says the same.
  clock_.Advance(
      std::chrono::seconds(core::ParseRfc3339("2026-12-02T00:00:00Z").value() - clock_.NowUnix()));
  billing::Invoices invoices(*db_, clock_, rng_, options_.host_unknown_after_seconds);
  ASSERT_TRUE(invoices.CloseMonth("2026-11", "", "system"));
  auto mine = invoices.ForPerson("alice");
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->size(), 1u);
  ASSERT_EQ((*mine)[0].lines.size(), 1u);
  EXPECT_EQ((*mine)[0].lines[0].minutes, 10);
}

TEST_F(MeteringSyncTest, AnEngineThatDoesNotAnswerIsNoEvidence) {
  ReportFor(600, [&] { return Container(kRun1); });
  for (int i = 0; i < 6; ++i) {  // a minute of rounds with the engine down
    clock_.Advance(std::chrono::seconds(10));
    auto r = sync_->Sync(host_, {{"agent_version", "0.1.0"},
                                 {"engine", {{"ok", false}, {"error", "engine_unavailable"}}},
                                 {"containers", Container(kRun1, "unknown")}});
    ASSERT_TRUE(r);
  }
  EXPECT_EQ(Billed().billed_seconds, 600);
  Sync(Container(kRun1));  // it ran through
  EXPECT_EQ(Billed().billed_seconds, 660);
}

TEST_F(MeteringSyncTest, ARestartInTheMiddleKeepsOneSession) {
  ReportFor(600, [&] { return Container(kRun1); });
  auto restarted = instances_->Restart("alice", instance_.id, "127.0.0.1");
  ASSERT_TRUE(restarted) << restarted.error().api_code;
  EXPECT_EQ(restarted->billing_session_id, instance_.billing_session_id);
  restart_generation_ = 1;
  // The restart makes a new container start time; the host never went silent.
  ReportFor(600, [&] { return Container("2026-11-10T10:10:05Z"); });
  Delete();
  EXPECT_EQ(Billed().billed_seconds, 1200);
  EXPECT_EQ(Billed().minutes, 20);
  auto sessions = db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM billing_sessions"));
    return row->Int(0);
  });
  EXPECT_EQ(*sessions, 1);
}

TEST_F(MeteringSyncTest, APriceChangeDuringASessionKeepsTheLockedPrice) {
  auto before = db_->Read([&](store::Transaction& tx) {
    return billing::BillingSessionTable::Find(tx, instance_.billing_session_id);
  });
  ASSERT_TRUE(before && *before);
  const int64_t locked = (*before)->price_minor_per_hour;
  EXPECT_EQ(locked, 65);
  ReportFor(1800, [&] { return Container(kRun1); });
  ASSERT_TRUE(hosts_->SetGpuType(
      "op", "spark-1x", {.price_minor_per_hour = locked * 10 + 1, .currency = "eur"}, "127.0.0.1"));
  ReportFor(1800, [&] { return Container(kRun1); });
  Delete();
  auto after = db_->Read([&](store::Transaction& tx) {
    return billing::BillingSessionTable::Find(tx, instance_.billing_session_id);
  });
  ASSERT_TRUE(after && *after);
  EXPECT_EQ((*after)->price_minor_per_hour, locked);
  EXPECT_EQ((*after)->currency, (*before)->currency);
  EXPECT_EQ(Billed().minutes, 60);
  EXPECT_EQ(Billed().amount_minor, billing::LineAmountMinor(locked, 60));
}

}  // namespace
}  // namespace gpuwerk::sched
