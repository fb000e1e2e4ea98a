// Hermetic tests of hosts, instances and the agent sync against a real SQLite store in a temp
// dir, with a FakeClock.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "billing/manual_provider.h"
#include "billing/payment_methods.h"
#include "core/logging.h"
#include "mail/outbox.h"
#include "protocol/agent_sync.h"
#include "sched/agent_sync.h"
#include "sched/host_registry.h"
#include "sched/instance_service.h"
#include "sched/sched_store_test.h"

namespace gpuwerk::sched {
namespace {

using nlohmann::json;

class SchedTest : public SchedStoreTest {
 protected:
  void SetUp() override {
    SchedStoreTest::SetUp();
    if (HasFatalFailure()) return;
    options_.host_unknown_after_seconds = 30;
    hosts_ = std::make_unique<HostRegistry>(*db_, clock_, rng_);
    instances_ = std::make_unique<InstanceService>(*db_, clock_, rng_, options_);
    sync_ = std::make_unique<AgentSync>(*db_, clock_, rng_, options_);
    AddPerson("alice");
    AddPerson("bob");
    AddKey("alice", "key_alice");
    AddKey("bob", "key_bob");
  }
  /// Registers a host (its sshd on 10.0.0.5, the default ports) and has its agent sync once (so
  /// it counts as online).
  Host AddHost(const std::string& name, const std::string& type = "spark-1x", bool gpu = true) {
    auto h =
        hosts_->Add("op", name, type, gpu, "127.0.0.1", SshRegistration{.address = "10.0.0.5"});
    EXPECT_TRUE(h) << h.error().message;
    auto authed = hosts_->AuthenticateAgent(h->token);
    EXPECT_TRUE(authed);
    Sync(*authed);
    return *authed;
  }
  json Sync(const Host& host, json containers = json::array(), json failures = json::array(),
            json engine = {{"ok", true}, {"error", ""}}) {
    auto r = sync_->Sync(host, {{"agent_version", "0.1.0"},
                                {"inventory", {{"addresses", {"10.0.0.5"}}}},
                                {"engine", engine},
                                {"containers", containers},
                                {"failures", failures}});
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : json();
  }
  static json Container(const Instance& in, const std::string& state, bool ssh_ready,
                        int64_t generation = 0) {
    return {
        {"instance_id", in.id}, {"node_index", 0},        {"container_id", "c1"},
        {"state", state},       {"exit_code", 0},         {"started_at", "2026-11-30T04:10:03Z"},
        {"ssh_port", 40123},    {"ssh_ready", ssh_ready}, {"restart_generation", generation},
        {"error", ""}};
  }
  Instance MustCreate(const std::string& name, const std::string& type = "spark-1x") {
    auto in = instances_->Create("alice", name, "key_alice", type, "127.0.0.1");
    EXPECT_TRUE(in) << in.error().api_code;
    return in ? *in : Instance{};
  }
  int64_t Count(const std::string& sql) {
    auto n = db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    return n ? *n : -1;
  }
  std::string Status(const std::string& id) {
    auto in = instances_->Get("alice", id);
    return in ? std::string(ToString(in->status)) : in.error().api_code;
  }

  SchedOptions options_;
  std::unique_ptr<HostRegistry> hosts_;
  std::unique_ptr<InstanceService> instances_;
  std::unique_ptr<AgentSync> sync_;
};

TEST_F(SchedTest, CreatePlacesOnAFreeHostAndOpensABillingSession) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  EXPECT_EQ(in.status, InstanceStatus::kProvisioning);
  EXPECT_EQ(in.hosts, std::vector<std::string>{"spark-a"});
  EXPECT_TRUE(in.hostname.starts_with("alpha-"));
  EXPECT_EQ(in.hostname.size(), std::string("alpha-").size() + 5);
  EXPECT_EQ(in.ssh_key_name, "laptop");
  EXPECT_FALSE(in.billing_session_id.empty());
  EXPECT_EQ(in.billing_started_at, clock_.NowUnix());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'instance.create'"), 1);

  json r = Sync(host);
  EXPECT_EQ(r["host_id"], host.id);
  ASSERT_EQ(r["desired"].size(), 1u);
  const json& d = r["desired"][0];
  EXPECT_EQ(d["instance_id"], in.id);
  EXPECT_EQ(d["container_name"], "gpuwerk-" + in.id + "-0");
  EXPECT_EQ(d["hostname"], in.hostname);
  EXPECT_EQ(d["image"], "localhost/gpuwerk-instance:bookworm");
  EXPECT_EQ(d["gpu"], true);
  EXPECT_EQ(d["authorized_keys"][0], "ssh-ed25519 AAAAkey_alice laptop\n");
  EXPECT_EQ(d["restart_generation"], 0);
}

TEST_F(SchedTest, NoCapacityWhenEveryHostIsTakenOrSilentOrDrained) {
  // No host at all: the type is not online (the API then queues the request).
  auto none = instances_->Create("alice", "alpha", "key_alice", "spark-1x", "x");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().api_code, "gpu_type_offline");
  EXPECT_EQ(none.error().details["gpu_type"], "spark-1x");

  AddHost("spark-a");
  MustCreate("alpha");
  auto full = instances_->Create("alice", "beta", "key_alice", "spark-1x", "x");
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().api_code, "no_capacity");
  EXPECT_EQ(full.error().details["gpu_type"], "spark-1x");
  EXPECT_EQ(full.error().details["queue"]["offer"], true);

  AddHost("spark-b");
  ASSERT_TRUE(hosts_->SetDrained("op", "spark-b", true, "x"));
  EXPECT_EQ(instances_->Create("alice", "beta", "key_alice", "spark-1x", "x").error().api_code,
            "no_capacity");
  ASSERT_TRUE(hosts_->SetDrained("op", "spark-b", false, "x"));
  clock_.Advance(std::chrono::seconds(31));  // both went silent: not online
  EXPECT_EQ(instances_->Create("alice", "beta", "key_alice", "spark-1x", "x").error().api_code,
            "gpu_type_offline");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instances"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions"), 1);
}

TEST_F(SchedTest, NameKeyAndGpuTypeRules) {
  AddHost("spark-a");
  for (const std::string& bad :
       std::vector<std::string>{"", "-a", "a-", "Alpha", "a_b", "a.b", std::string(64, 'a')}) {
    auto r = instances_->Create("alice", bad, "key_alice", "spark-1x", "x");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_name") << bad;
  }
  auto other_key = instances_->Create("alice", "alpha", "key_bob", "spark-1x", "x");
  ASSERT_FALSE(other_key);
  EXPECT_EQ(other_key.error().api_code, "not_found");
  auto type = instances_->Create("alice", "alpha", "key_alice", "spark-9x", "x");
  ASSERT_FALSE(type);
  EXPECT_EQ(type.error().api_code, "unknown_gpu_type");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instances"), 0);

  MustCreate(std::string(63, 'a'));
  AddHost("spark-b");
  auto taken = instances_->Create("alice", std::string(63, 'a'), "key_alice", "spark-1x", "x");
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().api_code, "name_taken");
  // Bob may use the same name.
  EXPECT_TRUE(instances_->Create("bob", std::string(63, 'a'), "key_bob", "spark-1x", "x"));
}

TEST_F(SchedTest, C15_TwoReservationsRaceForTheLastHost) {
  AddHost("spark-a");
  constexpr int kThreads = 8;
  std::atomic<int> won{0}, no_capacity{0}, other{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go) std::this_thread::yield();
      auto r =
          instances_->Create("alice", "racer-" + std::to_string(i), "key_alice", "spark-1x", "x");
      if (r) {
        ++won;
      } else if (r.error().api_code == "no_capacity") {
        ++no_capacity;
      } else {
        ++other;
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(won, 1);
  EXPECT_EQ(no_capacity, kThreads - 1);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM placements"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instances"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions"), 1);
}

TEST_F(SchedTest, PlacementsTableRefusesASecondInstanceOnAHost) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  auto r = db_->Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(
        tx.Exec("INSERT INTO placements (instance_id, host_id, node_index) VALUES "
                "(?, ?, 1)",
                {in.id, host.id}));
    return {};
  });
  ASSERT_FALSE(r);
  EXPECT_TRUE(store::IsUniqueViolation(r.error())) << r.error().message;
}

TEST_F(SchedTest, StatusFollowsTheEngineStateC11) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  EXPECT_EQ(Status(in.id), "provisioning");  // no container yet
  struct Case {
    std::string state;
    bool ssh_ready;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{{"created", false, "provisioning"},
                                         {"running", false, "provisioning"},
                                         {"running", true, "running"},
                                         {"restarting", false, "restarting"},
                                         {"exited", false, "exited"},
                                         {"dead", false, "exited"},
                                         {"running", true, "running"}}) {
    Sync(host, json::array({Container(in, c.state, c.ssh_ready)}));
    EXPECT_EQ(Status(in.id), c.want) << c.state << " ssh_ready=" << c.ssh_ready;
    EXPECT_EQ(Count("SELECT COUNT(*) FROM instances WHERE status = '" + c.want + "'"), 1)
        << "stored status for " << c.state;
  }
  auto shown = instances_->Get("alice", "alpha");
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->ssh_address, "10.0.0.5");
  EXPECT_EQ(shown->ssh_port, 40123);

  // The host goes silent: unknown on read at once, persisted by MarkUnknownHosts.
  clock_.Advance(std::chrono::seconds(31));
  EXPECT_EQ(Status(in.id), "unknown");
  auto marked = instances_->MarkUnknownHosts(clock_.NowUnix());
  ASSERT_TRUE(marked);
  EXPECT_EQ(*marked, 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instances WHERE status = 'unknown'"), 1);
  // Heard from again: back to running.
  Sync(host, json::array({Container(in, "running", true)}));
  EXPECT_EQ(Status(in.id), "running");

  // The engine is gone: unknown, and the reason says so.
  Sync(host, json::array(), json::array(), {{"ok", false}, {"error", "socket gone"}});
  auto engine_down = instances_->Get("alice", in.id);
  EXPECT_EQ(engine_down->status, InstanceStatus::kUnknown);
  EXPECT_NE(engine_down->status_reason.find("socket gone"), std::string::npos);
}

TEST_F(SchedTest, RestartBumpsGenerationKeepsSessionAndWaitsForTheAgent) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  Sync(host, json::array({Container(in, "running", true)}));
  auto r = instances_->Restart("alice", "alpha", "x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, InstanceStatus::kRestarting);
  EXPECT_EQ(r->restart_generation, 1);
  EXPECT_EQ(r->billing_session_id, in.billing_session_id);
  json resp = Sync(host, json::array({Container(in, "running", true, 0)}));
  EXPECT_EQ(resp["desired"][0]["restart_generation"], 1);
  EXPECT_EQ(Status(in.id), "restarting");  // not applied yet
  Sync(host, json::array({Container(in, "running", true, 1)}));
  EXPECT_EQ(Status(in.id), "running");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions WHERE ended_at IS NULL"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'instance.restart'"), 1);
}

// R-14 with the real gate (billing::PaymentMethods, manual provider): without a payment method
// a launch and a restart are refused with 402 payment_method_required saying what to do, and
// nothing is created or changed (no instance, placement, billing session or audit event; the
// in-transaction work never runs); a type that is not online is still joined through its queue
// by a create, card or not.
TEST_F(SchedTest, LaunchAndRestartNeedAPaymentMethod) {
  billing::ManualProvider provider;
  billing::PaymentMethods methods(*db_, clock_, rng_, provider);
  InstanceService gated(
      *db_, clock_, rng_, options_, nullptr,
      [&](store::Transaction& tx, const std::string& person, std::string_view action) {
        return methods.RequireForLaunch(tx, person, action);
      });
  Host host = AddHost("spark-a");
  bool in_tx_ran = false;
  auto refused = gated.Create("alice", "alpha", "key_alice", "spark-1x", "x",
                              [&](store::Transaction&, const Instance&) -> core::Result<void> {
                                in_tx_ran = true;
                                return {};
                              });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, core::ErrorCode::kPaymentRequired);
  EXPECT_EQ(refused.error().api_code, "payment_method_required");
  EXPECT_NE(refused.error().message.find("operator"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(in_tx_ran);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instances"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM placements"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'instance.create'"), 0);

  // With a card: launched. Cleared again: a restart is refused and changes nothing; the running
  // instance keeps running and its billing session stays open.
  const billing::CardFacts card{
      .brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2099};
  ASSERT_TRUE(methods.SetCard("op", "alice@example.test", card, "test"));
  auto in = gated.Create("alice", "alpha", "key_alice", "spark-1x", "x");
  ASSERT_TRUE(in) << in.error().message;
  Sync(host, json::array({Container(*in, "running", true)}));
  ASSERT_TRUE(methods.ClearCard("op", "alice@example.test", "test"));
  auto restart = gated.Restart("alice", "alpha", "x");
  ASSERT_FALSE(restart);
  EXPECT_EQ(restart.error().code, core::ErrorCode::kPaymentRequired);
  EXPECT_NE(restart.error().message.find("Restarting"), std::string::npos);
  auto now = gated.Get("alice", "alpha");
  ASSERT_TRUE(now);
  EXPECT_EQ(now->restart_generation, 0);
  EXPECT_EQ(now->status, InstanceStatus::kRunning);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions WHERE ended_at IS NULL"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'instance.restart'"), 0);
  // Deleting needs no card.
  EXPECT_TRUE(gated.Delete("alice", "alpha", "x"));

  // A type that is not online: bob, who has no card, joins its queue through a create.
  mail::Outbox outbox(*db_, clock_, rng_);
  QueueService queue(
      *db_, clock_, rng_, options_, outbox, {}, nullptr,
      [&](store::Transaction& tx, const std::string& person, std::string_view action) {
        return methods.RequireForLaunch(tx, person, action);
      });
  auto queued = gated.CreateOrJoinQueue(queue, "bob", "later", "key_bob", "spark-2x", "x");
  ASSERT_TRUE(queued) << queued.error().message;
  ASSERT_TRUE(queued->queue_entry.has_value());
  EXPECT_EQ(queued->queue_entry->status, QueueEntryStatus::kOpen);
}

TEST_F(SchedTest, C14_ActionOnDeletedInstance) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  Sync(host, json::array({Container(in, "running", true)}));
  auto d = instances_->Delete("alice", in.id, "x");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, InstanceStatus::kDeleting);
  auto restart = instances_->Restart("alice", in.id, "x");
  ASSERT_FALSE(restart);
  EXPECT_EQ(restart.error().api_code, "instance_deleting");
  EXPECT_EQ(restart.error().code, core::ErrorCode::kFailedPrecondition);
  // A repeated delete is fine; nothing is wanted on the host any more.
  EXPECT_TRUE(instances_->Delete("alice", in.id, "x"));
  EXPECT_TRUE(Sync(host, json::array({Container(in, "running", true)}))["desired"].empty());
  EXPECT_EQ(Status(in.id), "deleting");  // the container is still there
  // Gone: finalized.
  EXPECT_TRUE(Sync(host)["desired"].empty());
  EXPECT_EQ(instances_->Restart("alice", in.id, "x").error().api_code, "not_found");
  EXPECT_EQ(instances_->Delete("alice", in.id, "x").error().api_code, "not_found");
  EXPECT_EQ(instances_->Get("alice", in.id).error().api_code, "not_found");
  EXPECT_TRUE(Sync(host)["desired"].empty());
  EXPECT_EQ(Count("SELECT restart_generation FROM instances"), 0);
}

TEST_F(SchedTest, DeletionFinalizationFreesTheHostAndTheName) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  Sync(host, json::array({Container(in, "running", true)}));
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(instances_->Delete("alice", "alpha", "x"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions WHERE ended_at = " +
                  std::to_string(clock_.NowUnix())),
            1);
  EXPECT_EQ(instances_->Create("alice", "beta", "key_alice", "spark-1x", "x").error().api_code,
            "no_capacity");  // the host is held until the container is gone
  Sync(host);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM placements"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instances WHERE deleted_at IS NOT NULL"), 1);
  Instance again = MustCreate("alpha");
  EXPECT_NE(again.id, in.id);
  EXPECT_NE(again.billing_session_id, in.billing_session_id);
  auto list = instances_->List("alice", 1);
  ASSERT_TRUE(list);
  EXPECT_EQ(list->total, 1);
}

TEST_F(SchedTest, FailureReportFreesCapacityAndEndsTheSession) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  Sync(host, json::array(),
       json::array({{{"instance_id", in.id},
                     {"node_index", 0},
                     {"code", "image_not_found"},
                     {"message", "no such image"}}}));
  auto shown = instances_->Get("alice", "alpha");
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->status, InstanceStatus::kFailed);
  EXPECT_NE(shown->status_reason.find("image_not_found"), std::string::npos);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM placements"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM billing_sessions WHERE ended_at IS NOT NULL"), 1);
  EXPECT_TRUE(Sync(host)["desired"].empty());
  EXPECT_EQ(instances_->Restart("alice", "alpha", "x").error().api_code, "instance_failed");
  MustCreate("beta");  // the host is free again
  // Deleting the failed instance finalizes it at once (it holds no host).
  auto d = instances_->Delete("alice", "alpha", "x");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, InstanceStatus::kDeleted);
}

TEST_F(SchedTest, AnotherHostsOrPersonsInstancesAreNotTouched) {
  Host a = AddHost("spark-a");
  Host b = AddHost("spark-b");
  Instance in = MustCreate("alpha");
  const Host& mine = in.hosts[0] == "spark-a" ? a : b;
  const Host& other = in.hosts[0] == "spark-a" ? b : a;
  // A lying agent on the other host reports the instance as failed and running: ignored.
  Sync(other, json::array({Container(in, "running", true)}),
       json::array({{{"instance_id", in.id}, {"node_index", 0}, {"code", "x"}}}));
  EXPECT_EQ(Status(in.id), "provisioning");
  Sync(mine, json::array({Container(in, "running", true)}));
  EXPECT_EQ(Status(in.id), "running");
  EXPECT_EQ(instances_->Get("bob", in.id).error().api_code, "not_found");
  EXPECT_EQ(instances_->Restart("bob", in.id, "x").error().api_code, "not_found");
  EXPECT_EQ(instances_->Delete("bob", in.id, "x").error().api_code, "not_found");
}

Host Fresh(HostRegistry& hosts, const std::string& name);

// a 2-host type takes the two hosts of one linked pair; unpaired hosts never take one, and
// the type is not online until a pair of usable hosts exists.
TEST_F(SchedTest, TwoHostTypeTakesALinkedPair) {
  AddHost("pair-a", "spark-2x", false);
  AddHost("pair-b", "spark-2x", false);
  EXPECT_EQ(instances_->Create("alice", "big", "key_alice", "spark-2x", "x").error().api_code,
            "gpu_type_offline");  // two free hosts, but no pair
  auto types = instances_->GpuTypes();
  ASSERT_TRUE(types);
  ASSERT_EQ(types->size(), 2u);
  EXPECT_EQ((*types)[1].name, "spark-2x");
  EXPECT_FALSE((*types)[1].online);
  EXPECT_EQ((*types)[1].online_hosts, 2);
  EXPECT_EQ((*types)[1].hosts, 2);
  EXPECT_EQ((*types)[1].free_instances, 0);

  // Node 0 is the first host named.
  auto pair = hosts_->LinkPair("op", {"pair-b", "192.168.100.2"}, {"pair-a", "192.168.100.1"}, "x");
  ASSERT_TRUE(pair) << pair.error().message;
  EXPECT_TRUE(pair->id.starts_with("hpr_"));
  EXPECT_EQ(pair->gpu_type, "spark-2x");
  ASSERT_EQ(pair->members.size(), 2u);
  EXPECT_EQ(pair->members[0].host_name, "pair-b");
  EXPECT_EQ(pair->members[0].rail_address, "192.168.100.2");
  EXPECT_EQ(pair->members[1].host_name, "pair-a");
  types = instances_->GpuTypes();
  EXPECT_TRUE((*types)[1].online);
  EXPECT_EQ((*types)[1].pairs, 1);
  EXPECT_EQ((*types)[1].free_instances, 1);

  Instance in = MustCreate("big", "spark-2x");
  EXPECT_EQ(in.hosts, (std::vector<std::string>{"pair-b", "pair-a"}));  // node 0 → member 0
  EXPECT_FALSE(in.gpu_attached);
  EXPECT_EQ((*instances_->GpuTypes())[1].free_instances, 0);
  EXPECT_TRUE((*instances_->GpuTypes())[1].online);  // busy, still online
  EXPECT_EQ(instances_->Create("alice", "big2", "key_alice", "spark-2x", "x").error().api_code,
            "no_capacity");

  // A third and fourth host, unpaired: never used, the type stays full.
  AddHost("pair-c", "spark-2x", false);
  AddHost("pair-d", "spark-2x", false);
  EXPECT_EQ(instances_->Create("alice", "big2", "key_alice", "spark-2x", "x").error().api_code,
            "no_capacity");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM placements"), 2);
  // Listed with their pair.
  auto listed = hosts_->List(1);
  ASSERT_TRUE(listed);
  for (const auto& h : listed->items) {
    if (h.name == "pair-a") {
      EXPECT_EQ(h.pair_id, pair->id);
      EXPECT_EQ(h.node_index, 1);
      EXPECT_EQ(h.rail_address, "192.168.100.1");
      EXPECT_EQ(h.partner, "pair-b");
      EXPECT_EQ(h.instance_id, in.id);
    }
    if (h.name == "pair-c") {
      EXPECT_TRUE(h.pair_id.empty());
    }
  }
  // Linked: the second pair takes the next instance.
  ASSERT_TRUE(hosts_->LinkPair("op", {"pair-c", "fd00::1"}, {"pair-d", "fd00::2"}, "x"));
  Instance second = MustCreate("big2", "spark-2x");
  EXPECT_EQ(second.hosts, (std::vector<std::string>{"pair-c", "pair-d"}));
  // The desired state of a 2x instance tells each node where the other is.
  json desired = Sync(Fresh(*hosts_, "pair-d"))["desired"];
  ASSERT_EQ(desired.size(), 1u);
  EXPECT_EQ(desired[0]["node_index"], 1);
  const auto env = desired[0]["env"].get<std::vector<std::string>>();
  for (const char* want : {"GPUWERK_NODE_INDEX=1", "GPUWERK_NODE_COUNT=2",
                           "GPUWERK_NODE0_ADDR=fd00::1", "GPUWERK_NODE1_ADDR=fd00::2",
                           "VLLM_HOST_IP=fd00::2", "MASTER_ADDR=fd00::1", "MASTER_PORT=29500"}) {
    EXPECT_NE(std::find(env.begin(), env.end(), want), env.end()) << want;
  }
}

// R-8 (docs/clusters.md): each node of a 2x instance is told its cluster; the instance gets key
// pairs of its own (never the person's key, another instance's differ), node 0 alone gets the
// worker key's private half and node 1 alone its sshd host key; node 1's sshd takes the worker key
// from node 0's rail address only. The keys go with the instance.
TEST_F(SchedTest, TwoHostInstanceGetsItsClusterAndKeysOfItsOwnRemovedWithIt) {
  AddHost("n0", "spark-2x", false);
  AddHost("n1", "spark-2x", false);
  AddHost("m0", "spark-2x", false);
  AddHost("m1", "spark-2x", false);
  ASSERT_TRUE(hosts_->LinkPair("op", {"n0", "198.18.0.11"}, {"n1", "198.18.0.12"}, "x"));
  Instance in = MustCreate("big", "spark-2x");
  ASSERT_EQ(in.hosts, (std::vector<std::string>{"n0", "n1"}));
  ASSERT_TRUE(hosts_->LinkPair("op", {"m0", "198.18.1.11"}, {"m1", "198.18.1.12"}, "x"));
  Instance other = MustCreate("big2", "spark-2x");
  ASSERT_EQ(other.hosts, (std::vector<std::string>{"m0", "m1"}));

  const json d0 = Sync(Fresh(*hosts_, "n0"))["desired"].at(0);
  const json d1 = Sync(Fresh(*hosts_, "n1"))["desired"].at(0);
  auto c0 = protocol::ClusterSpecFromJson(d0.at("cluster"));
  auto c1 = protocol::ClusterSpecFromJson(d1.at("cluster"));
  ASSERT_TRUE(c0 && c1);
  EXPECT_EQ(c0->node_index, 0);
  EXPECT_EQ(c1->node_index, 1);
  EXPECT_EQ(c0->rail_addresses, (std::vector<std::string>{"198.18.0.11", "198.18.0.12"}));
  EXPECT_EQ(c1->rail_addresses, c0->rail_addresses);
  EXPECT_EQ(c0->rendezvous_port, 29400);
  EXPECT_EQ(c0->master_port, 29500);
  EXPECT_TRUE(c0->worker_private_key.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
  EXPECT_TRUE(c0->host_private_key.empty());  // node 0's sshd keeps its own host keys
  EXPECT_TRUE(c1->worker_private_key.empty());
  EXPECT_TRUE(c1->host_private_key.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
  EXPECT_EQ(c0->worker_public_key, c1->worker_public_key);
  EXPECT_EQ(c0->node1_host_public_key, c1->node1_host_public_key);
  EXPECT_TRUE(c0->worker_public_key.ends_with(" gpuwerk-worker-" + in.id));
  EXPECT_TRUE(c0->node1_host_public_key.ends_with(" gpuwerk-node1-" + in.id));
  // The person's key first on both (the agent proves the login with it); node 1 also takes the
  // worker key, from node 0's rail address only.
  const auto keys0 = d0["authorized_keys"].get<std::vector<std::string>>();
  const auto keys1 = d1["authorized_keys"].get<std::vector<std::string>>();
  ASSERT_EQ(keys0.size(), 1u);
  ASSERT_EQ(keys1.size(), 2u);
  EXPECT_EQ(keys1[0], keys0[0]);
  EXPECT_EQ(keys1[1], "from=\"198.18.0.11\" " + c0->worker_public_key);
  EXPECT_NE(keys0[0].substr(0, 60), c0->worker_public_key.substr(0, 60));
  // A second sync sends the same keys; another instance has its own.
  auto again = protocol::ClusterSpecFromJson(Sync(Fresh(*hosts_, "n0"))["desired"][0]["cluster"]);
  EXPECT_EQ(again->worker_private_key, c0->worker_private_key);
  auto theirs = protocol::ClusterSpecFromJson(Sync(Fresh(*hosts_, "m1"))["desired"][0]["cluster"]);
  EXPECT_NE(theirs->worker_public_key, c0->worker_public_key);
  EXPECT_NE(theirs->node1_host_public_key, c0->node1_host_public_key);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instance_cluster_keys"), 2);

  // Deleted: once both containers are gone, its keys are too (the other instance keeps its own).
  ASSERT_TRUE(instances_->Delete("alice", in.id, "x"));
  Sync(Fresh(*hosts_, "n0"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instance_cluster_keys WHERE instance_id = '" + in.id + "'"),
            1);  // node 1's container may still run
  Sync(Fresh(*hosts_, "n1"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instance_cluster_keys WHERE instance_id = '" + in.id + "'"),
            0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM instance_cluster_keys"), 1);
  (void)other;
}

// a 2x instance is running only when both nodes are; a node that is not says which one.
TEST_F(SchedTest, TwoHostInstanceStatusNamesTheNodeThatIsNotRunning) {
  AddHost("n0", "spark-2x", false);
  AddHost("n1", "spark-2x", false);
  ASSERT_TRUE(hosts_->LinkPair("op", {"n0", "198.18.0.11"}, {"n1", "198.18.0.12"}, "x"));
  Instance in = MustCreate("big", "spark-2x");
  const auto node = [&](int index, const std::string& state, bool ready) {
    json c = Container(in, state, ready);
    c["node_index"] = index;
    c["container_id"] = "c" + std::to_string(index);
    return json::array({c});
  };
  Sync(Fresh(*hosts_, "n0"), node(0, "running", true));
  Sync(Fresh(*hosts_, "n1"), node(1, "running", false));
  EXPECT_EQ(Status(in.id), "provisioning");  // node 1's sshd has not accepted yet
  Sync(Fresh(*hosts_, "n1"), node(1, "running", true));
  EXPECT_EQ(Status(in.id), "running");
  Sync(Fresh(*hosts_, "n1"), node(1, "exited", false));
  auto got = instances_->Get("alice", in.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, InstanceStatus::kExited);
  EXPECT_EQ(got->status_reason, "node 1 (host n1): its container is not running");
  ASSERT_EQ(got->nodes.size(), 2u);
  EXPECT_EQ(got->nodes[0].host, "n0");
  EXPECT_EQ(got->nodes[0].status, InstanceStatus::kRunning);
  EXPECT_EQ(got->nodes[1].host, "n1");
  EXPECT_EQ(got->nodes[1].status, InstanceStatus::kExited);
  // Node 1's host goes silent: unknown, naming it.
  Sync(Fresh(*hosts_, "n1"), node(1, "running", true));
  clock_.Advance(std::chrono::seconds(20));
  Sync(Fresh(*hosts_, "n0"), node(0, "running", true));
  clock_.Advance(std::chrono::seconds(20));
  got = instances_->Get("alice", in.id);
  EXPECT_EQ(got->status, InstanceStatus::kUnknown);
  EXPECT_TRUE(got->status_reason.starts_with("node 1 (host n1): host n1 has not been heard from"))
      << got->status_reason;
  EXPECT_EQ(got->nodes.at(0).status, InstanceStatus::kRunning);
  EXPECT_EQ(got->nodes.at(1).status, InstanceStatus::kUnknown);
}

// A pair of a drained, silent or degraded host is not a slot; the type is online only while
// one pair has two usable hosts.
TEST_F(SchedTest, PairWithAnUnusableHostIsNoCapacity) {
  AddHost("a", "spark-2x");
  AddHost("b", "spark-2x");
  ASSERT_TRUE(hosts_->LinkPair("op", {"a", "10.1.0.1"}, {"b", "10.1.0.2"}, "x"));
  ASSERT_TRUE(hosts_->SetDrained("op", "b", true, "x"));
  EXPECT_FALSE((*instances_->GpuTypes())[1].online);
  EXPECT_EQ(instances_->Create("alice", "big", "key_alice", "spark-2x", "x").error().api_code,
            "gpu_type_offline");
  ASSERT_TRUE(hosts_->SetDrained("op", "b", false, "x"));
  EXPECT_TRUE((*instances_->GpuTypes())[1].online);
  clock_.Advance(std::chrono::seconds(20));
  Sync(Fresh(*hosts_, "a"));
  clock_.Advance(std::chrono::seconds(15));  // b silent for 35 s, a for 15 s
  EXPECT_FALSE((*instances_->GpuTypes())[1].online);
  Sync(Fresh(*hosts_, "b"));
  EXPECT_TRUE(MustCreate("big", "spark-2x").id.starts_with("ins_"));
}

TEST_F(SchedTest, LinkingAPairChecksItsHosts) {
  AddHost("a", "spark-2x");
  AddHost("b", "spark-2x");
  AddHost("c", "spark-2x");
  AddHost("one", "spark-1x");
  auto code = [&](PairNode n0, PairNode n1) {
    auto r = hosts_->LinkPair("op", n0, n1, "x");
    return r ? std::string("ok") : r.error().api_code;
  };
  EXPECT_EQ(code({"a", "10.0.0.1"}, {"a", "10.0.0.2"}), "invalid_pair");
  EXPECT_EQ(code({"a", "10.0.0.1"}, {"b", "10.0.0.1"}), "invalid_pair");
  // The same address in its IPv4-mapped IPv6 spelling is the same address.
  EXPECT_EQ(code({"a", "::ffff:10.0.0.1"}, {"b", "10.0.0.1"}), "invalid_pair");
  for (const char* bad :
       {"", "10.0.0", "10.0.0.256", "host.example", " 10.0.0.1", "fe80::1%eth0", "0.0.0.0",
        "255.255.255.255", "224.0.0.1", "127.0.0.1", "::", "::1", "ff02::1", "::ffff:0.0.0.0"}) {
    EXPECT_EQ(code({"a", bad}, {"b", "10.0.0.2"}), "invalid_rail_address") << bad;
  }
  EXPECT_EQ(code({"a", "10.0.0.1"}, {"nope", "10.0.0.2"}), "not_found");
  EXPECT_EQ(code({"a", "10.0.0.1"}, {"one", "10.0.0.2"}), "gpu_type_mismatch");
  AddHost("two", "spark-1x");
  EXPECT_EQ(code({"one", "10.0.0.1"}, {"two", "10.0.0.2"}), "not_a_pair_type");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM host_pairs"), 0);
  EXPECT_EQ(code({"a", "10.0.0.1"}, {"b", "10.0.0.2"}), "ok");
  auto again = hosts_->LinkPair("op", {"c", "10.0.0.3"}, {"b", "10.0.0.4"}, "x");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "already_paired");
  EXPECT_EQ(again.error().details["host"], "b");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM host_pairs"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host_pair.link'"), 1);
  // An IPv6 rail address is stored normalised.
  AddHost("d", "spark-2x");
  auto v6 = hosts_->LinkPair("op", {"c", "FD00:0:0::10"}, {"d", "fd00::11"}, "x");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->members[0].rail_address, "fd00::10");
  auto page = hosts_->ListPairs(1);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->total, 2);
  EXPECT_EQ(page->items.size(), 2u);
  EXPECT_EQ(hosts_->ListPairs(0).error().api_code, "invalid_page");
}

TEST_F(SchedTest, UnlinkAndRemoveAreRefusedWhileAnInstanceIsPlaced) {
  Host a = AddHost("a", "spark-2x");
  AddHost("b", "spark-2x");
  auto pair = hosts_->LinkPair("op", {"a", "10.0.0.1"}, {"b", "10.0.0.2"}, "x");
  ASSERT_TRUE(pair);
  Instance in = MustCreate("big", "spark-2x");
  auto unlink = hosts_->UnlinkPair("op", pair->id, "x");
  ASSERT_FALSE(unlink);
  EXPECT_EQ(unlink.error().api_code, "host_in_use");
  EXPECT_EQ(unlink.error().details["instance_id"], in.id);
  for (const char* name : {"a", "b"}) {
    auto rm = hosts_->Remove("op", name, "x");
    ASSERT_FALSE(rm);
    EXPECT_EQ(rm.error().api_code, "host_in_use");
  }
  EXPECT_EQ(hosts_->Remove("op", "nope", "x").error().api_code, "not_found");
  EXPECT_EQ(hosts_->UnlinkPair("op", "hpr_nope", "x").error().api_code, "not_found");

  // Deleted (the agents report the containers gone): now both work.
  ASSERT_TRUE(instances_->Delete("alice", in.id, "x"));
  Sync(Fresh(*hosts_, "a"));
  Sync(Fresh(*hosts_, "b"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM placements"), 0);
  ASSERT_TRUE(hosts_->UnlinkPair("op", pair->id, "x"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM host_pair_members"), 0);
  ASSERT_TRUE(hosts_->LinkPair("op", {"a", "10.0.0.1"}, {"b", "10.0.0.2"}, "x"));
  auto removed = hosts_->Remove("op", "a", "x");
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(removed->name, "a");
  // Gone with its pair; its token no longer works; the partner stays, unpaired.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM hosts WHERE name = 'a'"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM host_pairs"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM hosts WHERE name = 'b'"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.remove'"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host_pair.unlink'"), 1);
  EXPECT_EQ(hosts_->Remove("op", "a", "x").error().api_code, "not_found");
  (void)a;
}

TEST_F(SchedTest, RemovedHostsTokenStopsWorking) {
  auto h = hosts_->Add("op", "spark-a", "spark-1x", true, "x");
  ASSERT_TRUE(h);
  ASSERT_TRUE(hosts_->AuthenticateAgent(h->token));
  ASSERT_TRUE(hosts_->Remove("op", "spark-a", "x"));
  EXPECT_EQ(hosts_->AuthenticateAgent(h->token).error().api_code, "unauthenticated");
  // The name is free again.
  EXPECT_TRUE(hosts_->Add("op", "spark-a", "spark-1x", true, "x"));
}

TEST_F(SchedTest, GpuTypesAreOperatorData) {
  // Create: hosts_per_instance and price are required; currency defaults to usd.
  auto missing = hosts_->SetGpuType("op", "spark-4x", {.price_minor_per_hour = 300}, "x");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().api_code, "invalid_field");
  EXPECT_EQ(missing.error().details["field"], "hosts_per_instance");
  auto made = hosts_->SetGpuType("op", "gb10-lite",
                                 {.hosts_per_instance = 1, .price_minor_per_hour = 40}, "x");
  ASSERT_TRUE(made) << made.error().message;
  EXPECT_TRUE(made->second);
  EXPECT_EQ(made->first.currency, "usd");
  EXPECT_EQ(made->first.description, "");

  auto code = [&](const std::string& name, GpuTypeChange c) {
    auto r = hosts_->SetGpuType("op", name, c, "x");
    return r ? std::string("ok") : r.error().api_code;
  };
  EXPECT_EQ(code("Bad_Name", {.price_minor_per_hour = 1}), "invalid_name");
  EXPECT_EQ(code("spark-1x", {.hosts_per_instance = 3}), "invalid_hosts_per_instance");
  EXPECT_EQ(code("spark-1x", {.hosts_per_instance = 0}), "invalid_hosts_per_instance");
  EXPECT_EQ(code("spark-1x", {.price_minor_per_hour = -1}), "invalid_price");
  EXPECT_EQ(code("spark-1x", {.price_minor_per_hour = 1'000'000'001}), "invalid_price");
  for (const char* bad : {"USD", "us", "usdd", "u$d", ""}) {
    EXPECT_EQ(code("spark-1x", {.currency = bad}), "invalid_currency") << bad;
  }
  EXPECT_EQ(code("spark-1x", {.description = "two\nlines"}), "invalid_description");
  for (const char* bad :
       {"evil \u202e txet", "line\u2028sep", "para\u2029sep", "next\u0085line", "iso\u2066late",
        "zero\u200bwidth", "del\x7f", "alm\u061cmark", "soft\u00adhyphen", "zw\ufeffnbsp"}) {
    EXPECT_EQ(code("spark-1x", {.description = bad}), "invalid_description") << bad;
  }
  EXPECT_EQ(code("spark-1x", {.description = std::string(201, 'x')}), "invalid_description");
  EXPECT_EQ(code("spark-1x", {.description = std::string(200, 'x')}), "ok");
  EXPECT_EQ(Count("SELECT price_minor_per_hour FROM gpu_types WHERE name = 'spark-1x'"), 65);

  // A price change applies to billing sessions opened afterwards only.
  AddHost("spark-a");
  AddHost("spark-b");
  MustCreate("before");
  ASSERT_EQ(code("spark-1x", {.price_minor_per_hour = 80, .currency = "eur"}), "ok");
  MustCreate("after");
  EXPECT_EQ(Count("SELECT price_minor_per_hour FROM billing_sessions WHERE instance_name = "
                  "'before'"),
            65);
  EXPECT_EQ(Count("SELECT price_minor_per_hour FROM billing_sessions WHERE instance_name = "
                  "'after'"),
            80);
  EXPECT_EQ((*instances_->GpuTypes())[1].currency, "eur");  // sorted: gb10-lite, spark-1x, …

  // hosts_per_instance is fixed while the type has hosts, instances or entries.
  auto in_use = hosts_->SetGpuType("op", "spark-1x", {.hosts_per_instance = 2}, "x");
  ASSERT_FALSE(in_use);
  EXPECT_EQ(in_use.error().api_code, "gpu_type_in_use");
  EXPECT_EQ(in_use.error().details["hosts"], 2);
  EXPECT_EQ(in_use.error().details["instances"], 2);
  EXPECT_EQ(code("spark-1x", {.hosts_per_instance = 1}), "ok");   // no change
  EXPECT_EQ(code("gb10-lite", {.hosts_per_instance = 2}), "ok");  // unused: may change
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'gpu_type.create'"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'gpu_type.update'"), 4);
}

TEST_F(SchedTest, HostTokensAuthenticateOnlyTheirHost) {
  auto h = hosts_->Add("op", "spark-a", "spark-1x", true, "x");
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->token.starts_with("gwh_"));
  EXPECT_EQ(hosts_->AuthenticateAgent(h->token)->id, h->host.id);
  EXPECT_EQ(hosts_->AuthenticateAgent("gwh_wrong").error().api_code, "unauthenticated");
  EXPECT_EQ(hosts_->AuthenticateAgent("").error().api_code, "unauthenticated");
  EXPECT_EQ(hosts_->Add("op", "spark-a", "spark-1x", true, "x").error().api_code, "name_taken");
  EXPECT_EQ(hosts_->Add("op", "spark-b", "nope", true, "x").error().api_code, "unknown_gpu_type");
  EXPECT_EQ(hosts_->Add("op", "Bad_Name", "spark-1x", true, "x").error().api_code, "invalid_name");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM hosts WHERE token_hash = '" + h->token + "'"), 0);
}

TEST_F(SchedTest, HostsAreListedByNameFifteenAPageInTheStore) {
  for (int i = 16; i >= 0; --i) {  // added out of order: the list is by name
    if (i == 8) {
      AddHost("host-08");  // the only one online: the instance lands there
    } else {
      ASSERT_TRUE(hosts_->Add("op", fmt::format("host-{:02}", i), "spark-1x", true, "x"));
    }
  }
  Instance in = MustCreate("alpha");
  ASSERT_EQ(in.hosts, std::vector<std::string>{"host-08"});
  auto first = hosts_->List(1);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->page, 1);
  EXPECT_EQ(first->pages, 2);
  EXPECT_EQ(first->total, 17);
  ASSERT_EQ(first->items.size(), 15u);
  EXPECT_EQ(first->items.front().name, "host-00");
  EXPECT_EQ(first->items.back().name, "host-14");
  EXPECT_EQ(first->items[8].instance_id, in.id);
  auto second = hosts_->List(2);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->items.size(), 2u);
  EXPECT_EQ(second->items[0].name, "host-15");
  EXPECT_EQ(second->items[1].name, "host-16");
  EXPECT_EQ(second->total, 17);
  auto past = hosts_->List(3);
  ASSERT_TRUE(past);
  EXPECT_TRUE(past->items.empty());
  EXPECT_EQ(past->pages, 2);
  EXPECT_EQ(past->total, 17);
  EXPECT_EQ(hosts_->List(0).error().api_code, "invalid_page");
  // Get answers one host with the same fields: the placed instance shows on its host.
  auto placed = hosts_->Get("host-08");
  ASSERT_TRUE(placed) << placed.error().message;
  EXPECT_EQ(placed->instance_id, in.id);
  EXPECT_EQ(hosts_->Get("no-such-host").error().api_code, "not_found");
}

/// The host as the store has it now (the handler authenticates afresh on every sync).
Host Fresh(HostRegistry& hosts, const std::string& name) {
  auto host = hosts.Get(name);
  return host ? *host : Host{};
}

// C13: the NVIDIA runtime fails a create. The instance fails with the reason, its host is freed
// and degraded (no new placements), and stays so until the operator undrains it.
TEST_F(SchedTest, C13_RuntimeFailureDegradesTheHostUntilTheOperatorUndrainsIt) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  Sync(host, json::array(),
       json::array({{{"instance_id", in.id},
                     {"node_index", 0},
                     {"code", "engine_error"},
                     {"message", "start: unknown or invalid runtime name: nvidia"}}}));
  auto shown = instances_->Get("alice", in.id);
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->status, InstanceStatus::kFailed);
  EXPECT_NE(shown->status_reason.find("unknown or invalid runtime name: nvidia"),
            std::string::npos);
  Host now = Fresh(*hosts_, "spark-a");
  EXPECT_NE(now.degraded_reason.find("GPU runtime failed"), std::string::npos);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM placements"), 0);
  EXPECT_EQ(instances_->Create("alice", "beta", "key_alice", "spark-1x", "x").error().api_code,
            "gpu_type_offline");
  EXPECT_EQ((*instances_->GpuTypes())[0].free_instances, 0);
  EXPECT_FALSE((*instances_->GpuTypes())[0].online);
  // Sticky across later healthy syncs: the runtime is still broken until someone fixes it.
  Sync(now);
  now = Fresh(*hosts_, "spark-a");
  EXPECT_FALSE(now.degraded_reason.empty());
  ASSERT_TRUE(hosts_->SetDrained("op", "spark-a", false, "x"));
  EXPECT_TRUE(Fresh(*hosts_, "spark-a").degraded_reason.empty());
  Sync(Fresh(*hosts_, "spark-a"));
  EXPECT_TRUE(instances_->Create("alice", "beta", "key_alice", "spark-1x", "x"));
}

// C13: a host registered with a GPU whose agent sees none takes no instances while that lasts.
TEST_F(SchedTest, C13_HostWithoutItsGpuIsDegradedWhileTheGpuIsMissing) {
  Host host = AddHost("spark-a");
  auto sync = [&](json gpus) {
    auto r = sync_->Sync(Fresh(*hosts_, "spark-a"),
                         {{"inventory", {{"gpus", gpus}, {"nvml", "unavailable: Unknown Error"}}},
                          {"engine", {{"ok", true}, {"error", ""}}},
                          {"containers", json::array()},
                          {"failures", json::array()}});
    ASSERT_TRUE(r) << r.error().message;
  };
  sync(json::array());
  EXPECT_NE(Fresh(*hosts_, "spark-a").degraded_reason.find("no GPU visible"), std::string::npos);
  EXPECT_EQ(instances_->Create("alice", "alpha", "key_alice", "spark-1x", "x").error().api_code,
            "gpu_type_offline");
  sync(json::array({{{"name", "NVIDIA GB10"}, {"uuid", "GPU-1"}, {"memory_bytes", 1}}}));
  EXPECT_TRUE(Fresh(*hosts_, "spark-a").degraded_reason.empty());
  EXPECT_TRUE(instances_->Create("alice", "alpha", "key_alice", "spark-1x", "x"));
  // A host registered without a GPU is not degraded by having none.
  AddHost("cpu-only", "spark-1x", /*gpu=*/false);
  auto r = sync_->Sync(Fresh(*hosts_, "cpu-only"), {{"inventory", {{"gpus", json::array()}}}});
  ASSERT_TRUE(r);
  EXPECT_TRUE(Fresh(*hosts_, "cpu-only").degraded_reason.empty());
}

// A host whose container engine is away gets no new instances (they could not start).
TEST_F(SchedTest, HostWithItsEngineAwayGetsNoPlacement) {
  Host host = AddHost("spark-a");
  Sync(host, json::array(), json::array(), {{"ok", false}, {"error", "engine_unavailable: gone"}});
  EXPECT_EQ(Fresh(*hosts_, "spark-a").engine_error, "engine_unavailable: gone");
  EXPECT_EQ(instances_->Create("alice", "alpha", "key_alice", "spark-1x", "x").error().api_code,
            "gpu_type_offline");
  Sync(host);
  EXPECT_TRUE(instances_->Create("alice", "alpha", "key_alice", "spark-1x", "x"));
}

// An agent's first round ("observed": false) changes no observation or status.
TEST_F(SchedTest, FirstRoundWithoutObservationsKeepsStatuses) {
  Host host = AddHost("spark-a");
  Instance in = MustCreate("alpha");
  Sync(host, json::array({Container(in, "running", true)}));
  EXPECT_EQ(Status(in.id), "running");
  auto r = sync_->Sync(host, {{"observed", false}, {"containers", json::array()}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ((*r)["host_id"], host.id);
  EXPECT_EQ((*r)["desired"].size(), 1u);
  EXPECT_EQ(Status(in.id), "running");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM observed_containers"), 1);
}

// `gpuwerk up` re-registers its machine on every start: same host, new token, old one dead.
TEST_F(SchedTest, AddOrRotateTokenKeepsTheHostAndReplacesTheToken) {
  auto first = hosts_->AddOrRotateToken("", "local", "spark-1x", false, "local");
  ASSERT_TRUE(first) << first.error().message;
  auto second = hosts_->AddOrRotateToken("", "local", "spark-1x", true, "local");
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(first->host.id, second->host.id);
  EXPECT_NE(first->token, second->token);
  EXPECT_EQ(hosts_->AuthenticateAgent(first->token).error().api_code, "unauthenticated");
  EXPECT_EQ(hosts_->AuthenticateAgent(second->token)->id, first->host.id);
  EXPECT_TRUE(Fresh(*hosts_, "local").gpu_required);
  EXPECT_EQ(hosts_->AddOrRotateToken("", "local", "spark-2x", true, "x").error().api_code,
            "gpu_type_mismatch");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.token_rotated'"), 1);
  // With the address and ports its agent publishes sshd on (issue 12 finding 1).
  auto third = hosts_->AddOrRotateToken("", "local", "spark-1x", true, "local",
                                        SshRegistration{.address = "127.0.0.1"});
  ASSERT_TRUE(third) << third.error().message;
  EXPECT_EQ(Fresh(*hosts_, "local").ssh_address, "127.0.0.1");
  EXPECT_EQ(Fresh(*hosts_, "local").ssh_port_low, kDefaultSshPortLow);
  EXPECT_EQ(Fresh(*hosts_, "local").ssh_port_high, kDefaultSshPortHigh);
  EXPECT_EQ(hosts_
                ->AddOrRotateToken("", "local", "spark-1x", true, "local",
                                   SshRegistration{.address = "-x"})
                .error()
                .api_code,
            "invalid_ssh_address");
  EXPECT_EQ(Fresh(*hosts_, "local").ssh_address, "127.0.0.1");
}

// Issue 12 finding 1: where sshd is reached comes from the host's registration. The agent's
// `inventory.ssh_address` is not used, and a port outside the registered range is not stored
// (the status says why; one warning and one audit event per change).
TEST_F(SchedTest, SshUpstreamComesFromTheRegistrationNeverFromTheAgent) {
  auto added =
      hosts_->Add("op", "spark-a", "spark-1x", true, "127.0.0.1",
                  SshRegistration{.address = "10.0.0.7", .port_low = 40000, .port_high = 40099});
  ASSERT_TRUE(added) << added.error().message;
  EXPECT_EQ(added->host.ssh_address, "10.0.0.7");
  Host host = *hosts_->AuthenticateAgent(added->token);
  EXPECT_EQ(host.ssh_port_low, 40000);
  EXPECT_EQ(host.ssh_port_high, 40099);
  Sync(host);
  Instance in = MustCreate("alpha");
  // The agent says another address (its inventory holds 10.0.0.5): the registered one counts.
  json c = Container(in, "running", true);
  c["ssh_port"] = 40050;
  Sync(host, json::array({c}));
  auto shown = instances_->Get("alice", "alpha");
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->ssh_address, "10.0.0.7");
  EXPECT_EQ(shown->ssh_port, 40050);
  EXPECT_EQ(Status(in.id), "running");

  // A port outside the range: not stored, the instance not reachable and says why, audited once.
  c["ssh_port"] = 38135;
  for (int round = 0; round < 3; ++round) Sync(host, json::array({c}));
  shown = instances_->Get("alice", "alpha");
  EXPECT_EQ(shown->ssh_port, 0);
  EXPECT_EQ(Status(in.id), "provisioning");
  EXPECT_NE(shown->status_reason.find("port 38135, outside the ports registered for it "
                                      "(40000-40099)"),
            std::string::npos)
      << shown->status_reason;
  EXPECT_EQ(Count("SELECT COUNT(*) FROM observed_containers WHERE ssh_port = 38135"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.ssh_port_refused'"), 1);
  c["ssh_port"] = 40051;
  Sync(host, json::array({c}));
  EXPECT_EQ(instances_->Get("alice", "alpha")->ssh_port, 40051);
  EXPECT_EQ(Status(in.id), "running");

  // The operator narrows the range: the stored port no longer counts, at once.
  auto set = hosts_->SetSsh("op", "spark-a",
                            {.address = "spark-a.internal", .port_low = 40000, .port_high = 40050},
                            "127.0.0.1");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->ssh_address, "spark-a.internal");
  shown = instances_->Get("alice", "alpha");
  EXPECT_EQ(shown->ssh_address, "spark-a.internal");
  EXPECT_EQ(shown->ssh_port, 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.set_ssh'"), 1);

  // A host registered without an address: nothing to connect to.
  auto bare = hosts_->Add("op", "spark-b", "spark-1x", true, "127.0.0.1");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->host.ssh_address, "");
  EXPECT_EQ(Fresh(*hosts_, "spark-b").ssh_port_high, 0);
}

TEST_F(SchedTest, SshRegistrationIsCheckedAndNothingIsStoredOnARefusal) {
  for (const char* address : {"-oProxyCommand=x", "10.0.0.5 -oProxyCommand=x", "", "a b",
                              "root@10.0.0.5", "10.0.0.5/24", "[::1]", "host\n", "-host"}) {
    EXPECT_EQ(CheckSshRegistration({.address = address}).error().api_code, "invalid_ssh_address")
        << address;
    EXPECT_EQ(hosts_->Add("op", "h1", "spark-1x", true, "x", SshRegistration{.address = address})
                  .error()
                  .api_code,
              "invalid_ssh_address")
        << address;
  }
  for (const auto& [low, high] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 100}, {1, 70000}, {0, 0}, {5000, 4000}, {-1, 10}, {65536, 65536}}) {
    EXPECT_EQ(CheckSshRegistration({.address = "10.0.0.5", .port_low = low, .port_high = high})
                  .error()
                  .api_code,
              "invalid_ssh_ports")
        << low << "-" << high;
  }
  for (const char* address : {"10.0.0.5", "fd00::5", "spark-a.internal", "spark-a"}) {
    EXPECT_TRUE(CheckSshRegistration({.address = address})) << address;
  }
  EXPECT_TRUE(CheckSshRegistration({.address = "10.0.0.5", .port_low = 22, .port_high = 22}));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM hosts"), 0);
  Host host = AddHost("spark-a");
  EXPECT_EQ(hosts_->SetSsh("op", "spark-a", {.address = "-oProxyCommand=x"}, "x").error().api_code,
            "invalid_ssh_address");
  EXPECT_EQ(
      hosts_->SetSsh("op", "spark-a", {.address = "10.0.0.6", .port_low = 0}, "x").error().api_code,
      "invalid_ssh_ports");
  EXPECT_EQ(hosts_->SetSsh("op", "nope", {.address = "10.0.0.6"}, "x").error().api_code,
            "not_found");
  EXPECT_EQ(Fresh(*hosts_, "spark-a").ssh_address, "10.0.0.5");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'host.set_ssh'"), 0);
}

TEST(DesiredStateNotifierTest, WaitReturnsOnNotifyOrDeadlineOrShutdown) {
  DesiredStateNotifier n;
  const uint64_t v0 = n.Version("a");
  EXPECT_EQ(n.Version("b"), v0);  // never notified: the epoch

  // A version that differs already: at once, on this thread.
  std::optional<uint64_t> got;
  n.Wait("a", v0 + 12345, std::chrono::seconds(10), [&](uint64_t v) { got = v; });
  EXPECT_EQ(got, v0);

  // Notify wakes the waiter of that host only.
  std::atomic<uint64_t> a_version{0}, b_version{0};
  n.Wait("a", v0, std::chrono::seconds(30), [&](uint64_t v) { a_version = v; });
  n.Wait("b", v0, std::chrono::seconds(30), [&](uint64_t v) { b_version = v; });
  EXPECT_EQ(n.waiting(), 2u);
  n.Notify({"a"});
  EXPECT_NE(a_version.load(), 0u);
  EXPECT_NE(a_version.load(), v0);
  EXPECT_EQ(a_version.load(), n.Version("a"));
  EXPECT_EQ(b_version.load(), 0u);
  EXPECT_EQ(n.waiting(), 1u);

  // The deadline answers with the unchanged version.
  std::atomic<bool> timed_out{false};
  n.Wait("c", v0, std::chrono::milliseconds(50), [&](uint64_t v) { timed_out = v == v0; });
  for (int i = 0; i < 200 && !timed_out; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(timed_out);

  // Shutdown answers the rest and every later Wait at once.
  n.Shutdown();
  EXPECT_EQ(b_version.load(), v0);
  EXPECT_EQ(n.waiting(), 0u);
  std::optional<uint64_t> late;
  n.Wait("a", n.Version("a"), std::chrono::seconds(30), [&](uint64_t v) { late = v; });
  EXPECT_TRUE(late.has_value());
}

TEST(DesiredStateNotifierTest, TwoNotifiersStartFromDifferentVersions) {
  DesiredStateNotifier a, b;
  EXPECT_NE(a.Version("h"), b.Version("h"));  // a restarted server wakes every watcher
}

// Create, restart and delete tell the notifier about the instance's hosts.
TEST_F(SchedTest, InstanceChangesNotifyTheirHosts) {
  DesiredStateNotifier notifier;
  InstanceService service(*db_, clock_, rng_, options_, &notifier);
  AddHost("spark-a");
  uint64_t v = notifier.Version("spark-a");
  auto in = service.Create("alice", "alpha", "key_alice", "spark-1x", "x");
  ASSERT_TRUE(in);
  EXPECT_NE(notifier.Version("spark-a"), v);
  v = notifier.Version("spark-a");
  ASSERT_TRUE(service.Restart("alice", "alpha", "x"));
  EXPECT_NE(notifier.Version("spark-a"), v);
  v = notifier.Version("spark-a");
  ASSERT_TRUE(service.Delete("alice", "alpha", "x"));
  EXPECT_NE(notifier.Version("spark-a"), v);
  v = notifier.Version("spark-a");
  EXPECT_FALSE(service.Restart("alice", "alpha", "x"));  // deleting: nothing changes
  EXPECT_EQ(notifier.Version("spark-a"), v);
}

}  // namespace
}  // namespace gpuwerk::sched
