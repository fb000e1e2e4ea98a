// Unit tests of the named steps that QueueService::Drain and AgentSync::Sync are loops over
// (internal/drain_steps.h, internal/sync_steps.h), the request parsing at the top of a sync, and
// the one To/From-string place of the state enums. A real SQLite store in a temp dir, a FakeClock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "core/logging.h"
#include "mail/outbox.h"
#include "sched/agent_sync.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/instance_table.h"
#include "sched/internal/drain_steps.h"
#include "sched/internal/queue_entry_table.h"
#include "sched/internal/sync_steps.h"
#include "sched/sched_store_test.h"
#include "sched/states.h"

namespace gpuwerk::sched {
namespace {

using nlohmann::json;

TEST(StatesTest, EveryLabelRoundTrips) {
  for (auto s : {InstanceStatus::kProvisioning, InstanceStatus::kRunning,
                 InstanceStatus::kRestarting, InstanceStatus::kExited, InstanceStatus::kUnknown,
                 InstanceStatus::kDeleting, InstanceStatus::kFailed, InstanceStatus::kDeleted}) {
    EXPECT_EQ(InstanceStatusFrom(ToString(s)), s) << ToString(s);
  }
  EXPECT_EQ(ToString(InstanceStatus::kProvisioning), "provisioning");
  EXPECT_EQ(ToString(DesiredState::kDeleted), "deleted");
  EXPECT_EQ(DesiredStateFrom("running"), DesiredState::kRunning);
  EXPECT_EQ(ToString(QueueEntryStatus::kCancelled), "cancelled");
  EXPECT_EQ(QueueEntryStatusFrom("launched"), QueueEntryStatus::kLaunched);
  EXPECT_EQ(InstanceStatusFrom("stopped"), std::nullopt);
  EXPECT_EQ(QueueEntryStatusFrom(""), std::nullopt);
}

TEST(ParseSyncReportTest, ReadsEachPartIntoPlainValues) {
  auto report = ParseSyncReport(
      {{"containers", json::array({{{"instance_id", "ins_a"},
                                    {"node_index", 1},
                                    {"container_id", std::string(200, 'c')},
                                    {"state", "running"},
                                    {"ssh_port", 2201},
                                    {"ssh_ready", true},
                                    {"restart_generation", 2}},
                                   "not an object"})},
       {"failures", json::array({{{"instance_id", "ins_b"}, {"code", "x"}, {"message", "m"}}})},
       {"inventory", {{"gpus", json::array()}}},
       {"engine", {{"ok", false}}},
       {"observed", false}});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_FALSE(report->observed);
  ASSERT_EQ(report->containers.size(), 1u);
  EXPECT_EQ(report->containers[0].instance_id, "ins_a");
  EXPECT_EQ(report->containers[0].node_index, 1);
  EXPECT_EQ(report->containers[0].container_id.size(), 128u);  // bounded
  EXPECT_TRUE(report->containers[0].ssh_ready);
  EXPECT_EQ(report->containers[0].ssh_port, 2201);
  EXPECT_EQ(report->containers[0].restart_generation, 2);
  ASSERT_EQ(report->failures.size(), 1u);
  EXPECT_EQ(report->failures[0].code, "x");
  EXPECT_EQ(report->engine_error, "unavailable");
  EXPECT_EQ(report->inventory_text, R"({"gpus":[]})");
}

TEST(ParseSyncReportTest, RefusesPartsOfTheWrongShapeByName) {
  auto not_object = ParseSyncReport(json::array());
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.error().api_code, "invalid_field");
  EXPECT_EQ(not_object.error().details["field"], "body");
  auto bad = ParseSyncReport({{"containers", json::object()}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().details["field"], "containers");
  auto engine = ParseSyncReport({{"engine", json::array()}});
  ASSERT_FALSE(engine);
  EXPECT_EQ(engine.error().details["field"], "engine");
  auto empty = ParseSyncReport(json::object());
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->observed);
  EXPECT_TRUE(empty->containers.empty());
  EXPECT_EQ(empty->engine_error, "");
}

TEST(DegradedReasonTest, GpuRuntimeFailureAndMissingGpuDegradeAHost) {
  Host host{.name = "h1", .gpu_required = true};
  SyncReport report;
  EXPECT_EQ(internal::DegradedReason(host, report), "");
  report.failures.push_back({.message = "Failed to initialize NVML"});
  EXPECT_EQ(internal::DegradedReason(host, report),
            "GPU runtime failed: Failed to initialize NVML");
  // A runtime failure stays until the operator undrains the host.
  host.degraded_reason = "GPU runtime failed: earlier";
  EXPECT_EQ(internal::DegradedReason(host, SyncReport{}), "GPU runtime failed: earlier");
  host.degraded_reason.clear();
  SyncReport no_gpu;
  no_gpu.inventory = {{"gpus", json::array()}, {"nvml", "no device"}};
  EXPECT_EQ(internal::DegradedReason(host, no_gpu),
            "no GPU visible to the agent (nvml: no device)");
  host.gpu_required = false;
  EXPECT_EQ(internal::DegradedReason(host, no_gpu), "");
}

// C15, the store against the engine: what the agent reports beside what the store placed on the
// host. A container of a node not placed here (never, or no longer) is a stray; so is every
// container of a node after its first.
TEST(StrayContainersTest, C15_ContainersTheStoreDidNotPlaceHereAreStrays) {
  internal::NodesHere here;
  here.nodes = {{"ins_a", 0}, {"ins_b", 1}};
  here.instances = {"ins_a", "ins_b"};
  // Agreement: each placed node once (in any state), and a placed node not reported at all.
  EXPECT_TRUE(
      internal::StrayContainers({{.instance_id = "ins_a", .container_id = "c1"}}, here).empty());
  EXPECT_TRUE(internal::StrayContainers({}, here).empty());
  const auto strays = internal::StrayContainers(
      {{.instance_id = "ins_a", .node_index = 0, .container_id = "c1"},
       {.instance_id = "ins_gone", .node_index = 0, .container_id = "c2"},  // not placed here
       {.instance_id = "ins_b", .node_index = 0, .container_id = "c3"},     // another node
       {.instance_id = "ins_a", .node_index = 0, .container_id = "c4"}},    // a second one
      here);
  ASSERT_EQ(strays.size(), 3u);
  EXPECT_EQ(strays[0].instance_id, "ins_gone");
  EXPECT_EQ(strays[0].container_id, "c2");
  EXPECT_FALSE(strays[0].duplicate);
  EXPECT_EQ(strays[1].instance_id, "ins_b");
  EXPECT_EQ(strays[1].node_index, 0);
  EXPECT_FALSE(strays[1].duplicate);
  EXPECT_EQ(strays[2].container_id, "c4");
  EXPECT_TRUE(strays[2].duplicate);
}

TEST(DegradedReasonTest, C15_StraysDegradeWhileReportedNamingTwoEscaped) {
  Host host{.name = "h1", .gpu_required = false};
  SyncReport report;
  const std::vector<internal::StrayContainer> one = {
      {.instance_id = "ins_gone", .node_index = 0, .container_id = "0123456789abcdef0123"}};
  EXPECT_EQ(internal::DegradedReason(host, report, one),
            "store and engine disagree: the engine runs 1 gpuwerk container that the store has "
            "not placed on this host: instance \"ins_gone\" node 0 (container "
            "\"0123456789ab…[20 bytes]\"); no new instances until it is gone");
  // Outside text is escaped and bounded; past two, a count; the reason stays within 500 bytes.
  const std::vector<internal::StrayContainer> many = {
      {.instance_id = "ins_\x1b[31m\"x", .container_id = std::string(4000, 'c')},
      {.instance_id = std::string(4000, 'i'), .node_index = 1, .duplicate = true},
      {.instance_id = "ins_c"},
      {.instance_id = "ins_d"}};
  const std::string reason = internal::DegradedReason(host, report, many);
  EXPECT_TRUE(reason.starts_with("store and engine disagree: the engine runs 4 gpuwerk containers"))
      << reason;
  EXPECT_NE(reason.find("instance \"ins_\\x1b[31m\\\"x\""), std::string::npos) << reason;
  EXPECT_NE(reason.find("a second container of instance"), std::string::npos) << reason;
  EXPECT_NE(reason.find("; and 2 more; no new instances until they are gone"), std::string::npos)
      << reason;
  EXPECT_EQ(reason.find("ins_c"), std::string::npos) << reason;
  EXPECT_LE(reason.size(), 500u);
  // Gone from the report: no longer degraded, except through a round that observed nothing.
  host.degraded_reason = internal::DegradedReason(host, report, one);
  EXPECT_EQ(internal::DegradedReason(host, report, {}), "");
  SyncReport first_round;
  first_round.observed = false;
  EXPECT_EQ(internal::DegradedReason(host, first_round, {}), host.degraded_reason);
  // A GPU runtime failure comes first, and stays.
  report.failures.push_back({.message = "unknown or invalid runtime name: nvidia"});
  EXPECT_TRUE(internal::DegradedReason(host, report, one).starts_with("GPU runtime failed: "));
}

class StepsTest : public SchedStoreTest {
 protected:
  void SetUp() override {
    SchedStoreTest::SetUp();
    if (HasFatalFailure()) return;
    hosts_ = std::make_unique<HostRegistry>(*db_, clock_, rng_);
    outbox_ = std::make_unique<mail::Outbox>(*db_, clock_, rng_);
    queue_ = std::make_unique<QueueService>(*db_, clock_, rng_, options_, *outbox_);
    instances_ = std::make_unique<InstanceService>(*db_, clock_, rng_, options_);
    sync_ = std::make_unique<AgentSync>(*db_, clock_, rng_, options_);
    for (const char* p : {"p0", "p1", "p2"}) AddPerson(p);
  }
  void TearDown() override {
    queue_.reset();
    SchedStoreTest::TearDown();
  }
  /// A person `id` with the key "key_<id>".
  void AddPerson(const std::string& id) {
    SchedStoreTest::AddPerson(id);
    AddKey(id, "key_" + id);
  }
  Host AddHost(const std::string& name) {
    auto h = hosts_->Add("op", name, "spark-1x", true, "127.0.0.1");
    EXPECT_TRUE(h) << h.error().message;
    auto authed = hosts_->AuthenticateAgent(h->token);
    EXPECT_TRUE(authed);
    EXPECT_TRUE(sync_->Sync(*authed, {{"containers", json::array()}}));
    return *authed;
  }
  std::string Join(const std::string& person) {
    auto e = queue_->Join(person, "spark-1x", "job-" + person, "key_" + person, "127.0.0.1");
    EXPECT_TRUE(e) << e.error().message;
    return e ? e->id : "";
  }
  /// Runs `fn(ctx)` in one write transaction with a drain context for spark-1x.
  template <class Fn>
  auto InDrain(Fn&& fn) {
    return db_->Write([&](store::Transaction& tx) {
      internal::DrainContext ctx{.tx = tx,
                                 .clock = clock_,
                                 .rng = rng_,
                                 .options = options_,
                                 .outbox = *outbox_,
                                 .gpu_type = "spark-1x",
                                 .now = clock_.NowUnix()};
      return fn(ctx);
    });
  }

  SchedOptions options_;
  std::unique_ptr<HostRegistry> hosts_;
  std::unique_ptr<mail::Outbox> outbox_;
  std::unique_ptr<QueueService> queue_;
  std::unique_ptr<InstanceService> instances_;
  std::unique_ptr<AgentSync> sync_;
};

TEST_F(StepsTest, EntryCursorWalksOpenEntriesBySeqAcrossBatches) {
  // More entries than one batch: the cursor reads them a batch at a time, in join order.
  std::vector<std::string> joined;
  for (int i = 0; i < internal::kDrainBatch + 3; ++i) {
    const std::string person = "q" + std::to_string(i);
    AddPerson(person);
    joined.push_back(Join(person));
  }
  auto walked = db_->Read([&](store::Transaction& tx) -> core::Result<std::vector<std::string>> {
    internal::EntryCursor cursor(tx, "spark-1x");
    std::vector<std::string> out;
    for (;;) {
      GPUWERK_ASSIGN_OR_RETURN(const internal::DrainCandidate* c, cursor.Next());
      if (c == nullptr) break;
      EXPECT_EQ(c->email, c->entry.person_id + "@example.test");
      out.push_back(c->entry.id);
    }
    return out;
  });
  ASSERT_TRUE(walked) << walked.error().message;
  EXPECT_EQ(*walked, joined);
}

TEST_F(StepsTest, SlotCursorGivesEachFreeHostOnceByName) {
  AddHost("h2");
  AddHost("h1");
  auto names = db_->Read([&](store::Transaction& tx) -> core::Result<std::vector<std::string>> {
    internal::SlotCursor cursor(tx, "spark-1x", 1, clock_.NowUnix(),
                                options_.host_unknown_after_seconds, "");
    std::vector<std::string> out;
    for (;;) {
      GPUWERK_ASSIGN_OR_RETURN(const internal::Slot* slot, cursor.Current());
      if (slot == nullptr) break;
      out.push_back(slot->name);
      cursor.Take();
    }
    return out;
  });
  ASSERT_TRUE(names) << names.error().message;
  EXPECT_EQ(*names, (std::vector<std::string>{"h1", "h2"}));
}

TEST_F(StepsTest, PassOverMarksAndMailsOnlyTheFirstTime) {
  const std::string id = Join("p0");
  auto candidate = [&](store::Transaction& tx) -> core::Result<internal::DrainCandidate> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, internal::QueueEntryTable::Find(tx, id));
    return internal::DrainCandidate{*row, "p0@example.test"};
  };
  auto first = InDrain([&](internal::DrainContext& ctx) -> core::Result<bool> {
    GPUWERK_ASSIGN_OR_RETURN(auto c, candidate(ctx.tx));
    return internal::PassOver(ctx, c, "no card");
  });
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(*first);
  auto second = InDrain([&](internal::DrainContext& ctx) -> core::Result<bool> {
    GPUWERK_ASSIGN_OR_RETURN(auto c, candidate(ctx.tx));
    EXPECT_TRUE(c.entry.passed_over_at.has_value());
    return internal::PassOver(ctx, c, "no card");
  });
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_FALSE(*second);
  auto entry = queue_->List("p0", 1);
  ASSERT_TRUE(entry);
  ASSERT_EQ(entry->items.size(), 1u);
  EXPECT_EQ(entry->items.at(0).status, QueueEntryStatus::kOpen);  // keeps its place
  EXPECT_EQ(entry->items.at(0).last_failure, "passed over: no card");
}

TEST_F(StepsTest, LaunchEntryKeepsThePlaceOfAnEntryWhoseKeyIsGone) {
  const std::string id = Join("p0");
  AddHost("h1");  // not drained: the test launches by hand
  ASSERT_TRUE(db_->Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.Exec("DELETE FROM ssh_keys WHERE id = 'key_p0'"));
    return {};
  }));
  auto launched = InDrain(
      [&](internal::DrainContext& ctx) -> core::Result<std::optional<internal::QueueLaunch>> {
        GPUWERK_ASSIGN_OR_RETURN(auto row, internal::QueueEntryTable::Find(ctx.tx, id));
        GPUWERK_ASSIGN_OR_RETURN(
            auto slots, internal::HostTable::FreeSlots(ctx.tx, "spark-1x", 1, 1, ctx.now,
                                                       options_.host_unknown_after_seconds));
        EXPECT_EQ(slots.size(), 1u);
        return internal::LaunchEntry(ctx, {*row, "p0@example.test"}, slots.at(0));
      });
  ASSERT_TRUE(launched) << launched.error().message;
  EXPECT_FALSE(launched->has_value());
  auto entry = queue_->List("p0", 1);
  ASSERT_TRUE(entry);
  ASSERT_EQ(entry->items.size(), 1u);
  EXPECT_EQ(entry->items.at(0).last_failure, "not launched: its SSH key is gone");
}

TEST_F(StepsTest, LaunchEntryCreatesTheInstanceAndMarksTheEntryLaunched) {
  const std::string id = Join("p0");
  const Host h1 = AddHost("h1");
  auto launched = InDrain(
      [&](internal::DrainContext& ctx) -> core::Result<std::optional<internal::QueueLaunch>> {
        GPUWERK_ASSIGN_OR_RETURN(auto row, internal::QueueEntryTable::Find(ctx.tx, id));
        return internal::LaunchEntry(ctx, {*row, "p0@example.test"},
                                     internal::Slot{.host_ids = {h1.id}, .name = "h1"});
      });
  ASSERT_TRUE(launched) << launched.error().message;
  ASSERT_TRUE(launched->has_value());
  EXPECT_EQ((*launched)->host_names, (std::vector<std::string>{"h1"}));
  auto history = queue_->History("p0", 1);
  ASSERT_TRUE(history);
  EXPECT_EQ(history->items.at(0).entry.status, QueueEntryStatus::kLaunched);
  EXPECT_EQ(history->items.at(0).entry.instance_id, (*launched)->instance_id);
  auto in = instances_->Get("p0", (*launched)->instance_id);
  ASSERT_TRUE(in) << in.error().message;
  EXPECT_EQ(in->name, "job-p0");
}

/// Runs `fn(ctx)` in one write transaction with a sync context for `host`.
template <class Fn>
auto InSync(store::Database& db, core::Clock& clock, core::Rng& rng, const SchedOptions& options,
            const Host& host, Fn&& fn) {
  return db.Write([&](store::Transaction& tx) {
    internal::SyncContext ctx{.tx = tx,
                              .clock = clock,
                              .rng = rng,
                              .options = options,
                              .host = host,
                              .now = clock.NowUnix()};
    return fn(ctx);
  });
}

TEST_F(StepsTest, ApplyFailuresFailsTheInstanceAndPutsItsEntryBack) {
  const std::string entry_id = Join("p0");
  const Host h1 = AddHost("h1");
  auto drained = queue_->Drain("spark-1x");
  ASSERT_TRUE(drained) << drained.error().message;
  ASSERT_EQ(drained->launched.size(), 1u);
  auto history = queue_->History("p0", 1);
  ASSERT_TRUE(history);
  const std::string instance_id = history->items.at(0).entry.instance_id;
  auto done = InSync(*db_, clock_, rng_, options_, h1,
                     [&](internal::SyncContext& ctx) -> core::Result<internal::NodesHere> {
                       GPUWERK_ASSIGN_OR_RETURN(auto here, internal::LoadNodesHere(ctx));
                       EXPECT_TRUE(here.instances.contains(instance_id));
                       GPUWERK_TRY(internal::ApplyFailures(
                           ctx,
                           {{.instance_id = instance_id, .code = "pull", .message = "no image"},
                            {.instance_id = "ins_elsewhere", .code = "x", .message = "y"}},
                           here));
                       return here;
                     });
  ASSERT_TRUE(done) << done.error().message;
  EXPECT_TRUE(done->nodes.empty());
  EXPECT_TRUE(done->instances.empty());
  auto row =
      db_->Read([&](store::Transaction& tx) { return InstanceTable::Find(tx, instance_id); });
  ASSERT_TRUE(row && *row);
  EXPECT_EQ((*row)->status, InstanceStatus::kFailed);
  EXPECT_EQ((*row)->status_reason, "pull: no image");
  auto entry = queue_->List("p0", 1);
  ASSERT_TRUE(entry);
  ASSERT_EQ(entry->items.size(), 1u);
  EXPECT_EQ(entry->items.at(0).id, entry_id);
  EXPECT_EQ(entry->items.at(0).last_failure, "launch failed on host h1: pull: no image");
}

TEST_F(StepsTest, RecordObservationsAndFinishDeletionsFreeTheHost) {
  const Host h1 = AddHost("h1");
  auto in = instances_->Create("p0", "box", "key_p0", "spark-1x", "127.0.0.1");
  ASSERT_TRUE(in) << in.error().message;
  auto observed =
      InSync(*db_, clock_, rng_, options_, h1,
             [&](internal::SyncContext& ctx) -> core::Result<std::set<internal::NodeKey>> {
               GPUWERK_ASSIGN_OR_RETURN(auto here, internal::LoadNodesHere(ctx));
               return internal::RecordObservations(
                   ctx,
                   {{.instance_id = in->id, .container_id = "c1", .state = "running"},
                    {.instance_id = "ins_not_here", .container_id = "c2"}},
                   here);
             });
  ASSERT_TRUE(observed) << observed.error().message;
  EXPECT_EQ(*observed, (std::set<internal::NodeKey>{{in->id, 0}}));
  ASSERT_TRUE(instances_->Delete("p0", in->id, "127.0.0.1"));
  // The container is gone (not reported): the node frees the host and finalizes the instance.
  auto finished = InSync(*db_, clock_, rng_, options_, h1,
                         [&](internal::SyncContext& ctx) -> core::Result<internal::NodesHere> {
                           GPUWERK_ASSIGN_OR_RETURN(auto here, internal::LoadNodesHere(ctx));
                           GPUWERK_TRY(internal::FinishDeletions(ctx, {}, here));
                           return here;
                         });
  ASSERT_TRUE(finished) << finished.error().message;
  EXPECT_TRUE(finished->instances.empty());
  auto row = db_->Read([&](store::Transaction& tx) { return InstanceTable::Find(tx, in->id); });
  ASSERT_TRUE(row && *row);
  EXPECT_EQ((*row)->status, InstanceStatus::kDeleted);
  EXPECT_TRUE((*row)->deleted_at.has_value());
}

TEST_F(StepsTest, CreateOrJoinQueueJoinsWhenTheTypeIsOffline) {
  auto queued =
      instances_->CreateOrJoinQueue(*queue_, "p0", "box", "key_p0", "spark-1x", "127.0.0.1");
  ASSERT_TRUE(queued) << queued.error().message;
  EXPECT_FALSE(queued->instance.has_value());
  ASSERT_TRUE(queued->queue_entry.has_value());
  EXPECT_EQ(queued->queue_entry->status, QueueEntryStatus::kOpen);
  AddHost("h1");
  auto created =
      instances_->CreateOrJoinQueue(*queue_, "p1", "box", "key_p1", "spark-1x", "127.0.0.1");
  ASSERT_FALSE(created);  // online, but p0 waits first
  EXPECT_EQ(created.error().api_code, "no_capacity");
}

}  // namespace
}  // namespace gpuwerk::sched
