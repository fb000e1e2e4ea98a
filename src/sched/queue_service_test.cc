// Hermetic tests of the queue against a real SQLite store in a temp dir, with a FakeClock: FIFO
// drains, passed-over entries, several launches in one drain, 2-host types.
#include "sched/queue_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <set>

#include "billing/manual_provider.h"
#include "billing/payment_methods.h"
#include "core/logging.h"
#include "mail/outbox.h"
#include "sched/agent_sync.h"
#include "sched/host_registry.h"
#include "sched/sched_store_test.h"
#include "store/leader_elector.h"
#include "tests/support/two_replicas.h"

namespace gpuwerk::sched {
namespace {

using nlohmann::json;

class QueueTest : public SchedStoreTest {
 protected:
  void SetUp() override {
    SchedStoreTest::SetUp();
    if (HasFatalFailure()) return;
    hosts_ = std::make_unique<HostRegistry>(*db_, clock_, rng_);
    outbox_ = std::make_unique<mail::Outbox>(*db_, clock_, rng_);
    queue_ = std::make_unique<QueueService>(
        *db_, clock_, rng_, options_, *outbox_, [this] { ++mail_wakes_; }, nullptr,
        [this](store::Transaction&, const std::string& person,
               std::string_view) -> core::Result<void> {
          if (!blocked_.contains(person)) return {};
          return core::Fail(core::ErrorCode::kPaymentRequired, "payment_method_required",
                            "Add a payment method.");
        });
    sync_ = std::make_unique<AgentSync>(*db_, clock_, rng_, options_);
    for (const char* p : {"p0", "p1", "p2", "p3"}) AddPerson(p);
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
  void AddHost(const std::string& name, const std::string& type = "spark-1x") {
    auto h = hosts_->Add("op", name, type, true, "127.0.0.1");
    ASSERT_TRUE(h) << h.error().message;
    auto authed = hosts_->AuthenticateAgent(h->token);
    ASSERT_TRUE(authed);
    ASSERT_TRUE(sync_->Sync(*authed, {{"containers", json::array()}}));
  }
  /// The queue entry ids launched by `result`, as their owners (entries are "job-<person>").
  std::vector<std::string> Owners(const DrainResult& result, const std::vector<std::string>& ids) {
    std::vector<std::string> out;
    for (const auto& id : ids) {
      auto row = db_->Read([&](store::Transaction& tx) {
        return tx.QueryOne("SELECT person_id FROM queue_entries WHERE id = ?", {id});
      });
      out.push_back(row && *row ? (*row)->Text(0) : "?");
    }
    (void)result;
    return out;
  }
  std::string Join(const std::string& person, const std::string& type = "spark-1x") {
    auto e = queue_->Join(person, type, "job-" + person, "key_" + person, "127.0.0.1");
    EXPECT_TRUE(e) << e.error().message;
    return e ? e->id : "";
  }
  std::string Status(const std::string& person) {
    auto list = queue_->History(person, 1);
    EXPECT_TRUE(list);
    return list->items.empty() ? "" : std::string(ToString(list->items.back().entry.status));
  }

  SchedOptions options_;
  std::unique_ptr<HostRegistry> hosts_;
  std::unique_ptr<mail::Outbox> outbox_;
  std::unique_ptr<QueueService> queue_;
  std::unique_ptr<AgentSync> sync_;
  std::set<std::string> blocked_;
  std::atomic<int> mail_wakes_{0};
};

// Dispatch is leader-only with a fence (docs/scale-out.md): a replica that does not hold the
// lease launches nothing (the entry stays open, in its place), and one paused past its lease (a
// new leader took over) has its drain refused in the drain's transaction, nothing written.
TEST_F(QueueTest, OnlyTheLeaseHolderDrainsAndAPausedOldHoldersDrainIsRefused) {
  gpuwerk::testing::TwoReplicaElectors replicas(*db_);
  store::LeaderElector& a = replicas.a;
  store::LeaderElector& b = replicas.b;
  ASSERT_TRUE(a.Step());
  ASSERT_TRUE(b.Step());
  QueueService queue_b(*db_, clock_, rng_, options_, *outbox_);
  queue_b.SetLeaderFence(&b);
  queue_->SetLeaderFence(&a);

  // b is not the leader: the join on it and its drains leave the entry open.
  auto joined = queue_b.Join("p0", "spark-1x", "job-p0", "key_p0", "127.0.0.1");
  ASSERT_TRUE(joined) << joined.error().message;
  AddHost("h1");
  auto nothing = queue_b.Drain("spark-1x");
  ASSERT_TRUE(nothing) << nothing.error().message;
  EXPECT_TRUE(nothing->launched.empty());
  EXPECT_EQ(Status("p0"), "open");

  // a pauses, its lease runs out, b takes over: a's drain is refused, nothing launched by it.
  replicas.lease_ms += 10'001;
  ASSERT_TRUE(b.Step());
  auto refused = queue_->Drain("spark-1x");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "not_leader");
  EXPECT_EQ(Status("p0"), "open");
  auto launched = queue_b.Drain("spark-1x");
  ASSERT_TRUE(launched) << launched.error().message;
  EXPECT_EQ(launched->launched.size(), 1u);
  EXPECT_EQ(Status("p0"), "launched");
}

TEST_F(QueueTest, OpenEntriesAreListedFifteenAPageInTheStore) {
  // One open entry per GPU type: 16 types make two pages.
  std::vector<std::string> ids;
  for (int i = 0; i < 16; ++i) {
    const std::string type = "type-" + std::to_string(100 + i);
    ASSERT_TRUE(hosts_->SetGpuType(
        "op", type, {.hosts_per_instance = 1, .price_minor_per_hour = 65, .currency = "usd"},
        "127.0.0.1"));
    auto e = queue_->Join("p0", type, "job-" + std::to_string(i), "key_p0", "127.0.0.1");
    ASSERT_TRUE(e) << e.error().message;
    ids.push_back(e->id);
    clock_.Advance(std::chrono::seconds(1));  // oldest first: by entered_at
  }
  Join("p1");  // another person's entry is not listed
  auto first = queue_->List("p0", 1);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->page, 1);
  EXPECT_EQ(first->pages, 2);
  EXPECT_EQ(first->total, 16);
  ASSERT_EQ(first->items.size(), 15u);
  EXPECT_EQ(first->items.front().id, ids.front());
  EXPECT_EQ(first->items.front().position, 1);
  EXPECT_EQ(first->items.back().id, ids[14]);
  auto second = queue_->List("p0", 2);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->items.size(), 1u);
  EXPECT_EQ(second->items[0].id, ids.back());
  EXPECT_EQ(second->total, 16);
  // Left entries are not open: the count follows.
  ASSERT_TRUE(queue_->Leave("p0", ids.back(), "127.0.0.1"));
  auto after = queue_->List("p0", 1);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->pages, 1);
  EXPECT_EQ(after->total, 15);
  EXPECT_TRUE(queue_->List("p0", 2)->items.empty());
  EXPECT_EQ(queue_->List("p0", 0).error().api_code, "invalid_page");
  EXPECT_EQ(queue_->List("p3", 1)->total, 0);
}

TEST_F(QueueTest, DrainLaunchesInJoinOrderWhileHostsLast) {
  for (const char* p : {"p0", "p1", "p2"}) Join(p);
  auto listed = queue_->List("p2", 1);
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->items.at(0).position, 3);
  AddHost("h1");
  AddHost("h2");
  auto drained = queue_->Drain("spark-1x");
  ASSERT_TRUE(drained) << drained.error().message;
  EXPECT_EQ(drained->launched.size(), 2u);
  EXPECT_EQ(Status("p0"), "launched");
  EXPECT_EQ(Status("p1"), "launched");
  EXPECT_EQ(Status("p2"), "open");
  EXPECT_EQ(queue_->List("p2", 1)->items.at(0).position, 1);
  EXPECT_GT(mail_wakes_.load(), 0);
  // Nothing left to do: an empty result.
  auto again = queue_->Drain("spark-1x");
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->launched.empty());
}

TEST_F(QueueTest, PassedOverEntryKeepsItsPlace) {
  blocked_ = {"p0"};
  Join("p0");
  Join("p1");
  Join("p2");
  AddHost("h1");
  ASSERT_TRUE(queue_->Drain("spark-1x"));
  EXPECT_EQ(Status("p0"), "open");
  EXPECT_EQ(Status("p1"), "launched");
  EXPECT_EQ(queue_->List("p0", 1)->items.at(0).position, 1);
  EXPECT_NE(queue_->List("p0", 1)->items.at(0).last_failure.find("passed over"), std::string::npos);
  blocked_.clear();
  AddHost("h2");
  ASSERT_TRUE(queue_->Drain("spark-1x"));
  EXPECT_EQ(Status("p0"), "launched");  // ahead of p2, who joined later
  EXPECT_EQ(Status("p2"), "open");
}

// R-14 with the real gate (billing::PaymentMethods, manual provider): an entry whose owner has
// no payment method is passed over at every drain while a host is free, keeps its place and its
// owner is mailed once per pass-over streak; a recorded card ends the streak (a later streak
// mails again), and with the card the entry launches.
TEST_F(QueueTest, PassOverStreakMailsOnceAndEndsWithACard) {
  billing::ManualProvider provider;
  billing::PaymentMethods methods(*db_, clock_, rng_, provider);
  QueueService queue(
      *db_, clock_, rng_, options_, *outbox_, {}, nullptr,
      [&](store::Transaction& tx, const std::string& person, std::string_view action) {
        return methods.RequireForLaunch(tx, person, action);
      });
  const billing::CardFacts card{
      .brand = "visa", .last4 = "4242", .exp_month = 12, .exp_year = 2099};
  ASSERT_TRUE(methods.SetCard("op", "p1@example.test", card, "test"));
  auto mails_to_p0 = [&](const std::string& subject_part) {
    auto n = db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row, tx.QueryOne("SELECT COUNT(*) FROM outbox_mails WHERE to_address = ? AND "
                                "subject LIKE ?",
                                {std::string("p0@example.test"), "%" + subject_part + "%"}));
      return row->Int(0);
    });
    return n ? *n : -1;
  };
  auto j0 = queue.Join("p0", "spark-1x", "job-p0", "key_p0", "127.0.0.1");
  ASSERT_TRUE(j0) << j0.error().message;
  auto j1 = queue.Join("p1", "spark-1x", "job-p1", "key_p1", "127.0.0.1");
  ASSERT_TRUE(j1) << j1.error().message;
  AddHost("h1");
  AddHost("h2");
  // Three drains while h2 stays free: passed over each time, one mail.
  for (int i = 0; i < 3; ++i) {
    auto drained = queue.Drain("spark-1x");
    ASSERT_TRUE(drained) << drained.error().message;
    EXPECT_EQ(drained->passed_over, std::vector<std::string>{j0->id}) << "drain " << i;
  }
  EXPECT_EQ(Status("p1"), "launched");
  EXPECT_EQ(Status("p0"), "open");
  EXPECT_EQ(queue.List("p0", 1)->items.at(0).position, 1);
  EXPECT_NE(queue.List("p0", 1)->items.at(0).last_failure.find("payment method"),
            std::string::npos);
  EXPECT_EQ(mails_to_p0("passed over"), 1);
  // A card ends the streak (EndPassOverStreaks, as app/ runs it after a card is recorded);
  // cleared again before a drain, the next pass-over starts a new streak: a second mail.
  ASSERT_TRUE(methods.SetCard("op", "p0@example.test", card, "test"));
  auto ended = queue.EndPassOverStreaks();
  ASSERT_TRUE(ended) << ended.error().message;
  EXPECT_EQ(*ended, 1);
  ASSERT_TRUE(methods.ClearCard("op", "p0@example.test", "test"));
  ASSERT_TRUE(queue.Drain("spark-1x"));
  ASSERT_TRUE(queue.Drain("spark-1x"));
  EXPECT_EQ(mails_to_p0("passed over"), 2);
  // With a card the entry launches on the free host, and its owner hears of the launch.
  ASSERT_TRUE(methods.SetCard("op", "p0@example.test", card, "test"));
  auto drained = queue.Drain("spark-1x");
  ASSERT_TRUE(drained) << drained.error().message;
  EXPECT_EQ(drained->launched, std::vector<std::string>{j0->id});
  EXPECT_TRUE(drained->passed_over.empty());
  EXPECT_EQ(Status("p0"), "launched");
  EXPECT_EQ(mails_to_p0("passed over"), 2);
}

TEST_F(QueueTest, TwoHostTypeWaitsForALinkedPair) {
  Join("p0", "spark-2x");
  AddHost("h1", "spark-2x");
  AddHost("h2", "spark-2x");
  ASSERT_TRUE(queue_->Drain("spark-2x"));
  EXPECT_EQ(Status("p0"), "open");  // two free hosts, but not linked: never used
  ASSERT_TRUE(hosts_->LinkPair("op", {"h2", "10.0.0.2"}, {"h1", "10.0.0.1"}, "x"));
  auto drained = queue_->Drain("spark-2x");
  ASSERT_TRUE(drained);
  EXPECT_EQ(drained->launched.size(), 1u);
  EXPECT_EQ(Status("p0"), "launched");
  // Node 0 of the pair is node 0 of the instance.
  auto nodes = db_->Read([&](store::Transaction& tx) {
    return tx.Query(
        "SELECT h.name FROM placements p JOIN hosts h ON h.id = p.host_id ORDER BY p.node_index");
  });
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].Text(0), "h2");
  EXPECT_EQ((*nodes)[1].Text(0), "h1");
}

// The drain reads the queue a batch at a time: more passed-over entries at the head than one
// batch, and more launches in one drain than one batch of free hosts, keep strict FIFO order.
TEST_F(QueueTest, DrainWalksTheQueueInBatches) {
  std::vector<std::string> people;
  for (int i = 0; i < 60; ++i) {
    people.push_back("q" + std::string(i < 10 ? "0" : "") + std::to_string(i));
    AddPerson(people.back());
    Join(people.back());
  }
  for (int i = 0; i < 20; ++i) blocked_.insert(people[static_cast<size_t>(i)]);
  for (int i = 0; i < 3; ++i) AddHost("h" + std::to_string(i));
  auto first = queue_->Drain("spark-1x");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->passed_over.size(), 20u);
  EXPECT_EQ(Owners(*first, first->launched), (std::vector<std::string>{"q20", "q21", "q22"}));
  // 25 more hosts: the next 20 passed-over entries once they may launch, then q23…q27.
  blocked_.clear();
  for (int i = 3; i < 28; ++i) AddHost("h" + std::to_string(i));
  auto second = queue_->Drain("spark-1x");
  ASSERT_TRUE(second);
  std::vector<std::string> want(people.begin(), people.begin() + 20);
  for (int i = 23; i < 28; ++i) want.push_back(people[static_cast<size_t>(i)]);
  EXPECT_EQ(Owners(*second, second->launched), want);
  EXPECT_EQ(queue_->List("q28", 1)->items.at(0).position, 1);
  EXPECT_EQ(queue_->List("q59", 1)->items.at(0).position, 32);
}

// What an agent sync that freed its host asks: only the slots holding the freed hosts.
TEST_F(QueueTest, DrainForFreedHostsLooksOnlyAtTheirSlots) {
  Join("p0");
  Join("p1");
  AddHost("h1");
  AddHost("h2");
  auto host_id = [&](const std::string& name) {
    auto row = db_->Read([&](store::Transaction& tx) {
      return tx.QueryOne("SELECT id FROM hosts WHERE name = ?", {name});
    });
    return row && *row ? (*row)->Text(0) : std::string();
  };
  auto drained = queue_->Drain("spark-1x", {host_id("h2")});
  ASSERT_TRUE(drained) << drained.error().message;
  EXPECT_EQ(Owners(*drained, drained->launched), (std::vector<std::string>{"p0"}));
  auto on = [&](const std::string& name) {
    auto row = db_->Read([&](store::Transaction& tx) {
      return tx.QueryOne(
          "SELECT COUNT(*) FROM placements p JOIN hosts h ON h.id = p.host_id WHERE h.name = ?",
          {name});
    });
    return row && *row ? (*row)->Int(0) : -1;
  };
  EXPECT_EQ(on("h2"), 1);
  EXPECT_EQ(on("h1"), 0);
  // A busy or unknown host: nothing.
  EXPECT_TRUE(queue_->Drain("spark-1x", {host_id("h2")})->launched.empty());
  EXPECT_TRUE(queue_->Drain("spark-1x", {"hst_nope"})->launched.empty());
  // A freed node 1 of a free pair is the pair's slot, node 0 first.
  Join("p2", "spark-2x");
  AddHost("a", "spark-2x");
  AddHost("b", "spark-2x");
  ASSERT_TRUE(hosts_->LinkPair("op", {"a", "10.0.0.1"}, {"b", "10.0.0.2"}, "x"));
  auto pair = queue_->Drain("spark-2x", {host_id("b")});
  ASSERT_TRUE(pair);
  EXPECT_EQ(Owners(*pair, pair->launched), (std::vector<std::string>{"p2"}));
  EXPECT_EQ(on("a"), 1);
  EXPECT_EQ(on("b"), 1);
  // The full drain finds h1 for p1.
  EXPECT_EQ(queue_->Drain("spark-1x")->launched.size(), 1u);
  EXPECT_EQ(Status("p1"), "launched");
}

TEST_F(QueueTest, LeftEntryIsNeverLaunched) {
  Join("p0");
  Join("p1");
  auto left = queue_->Leave("p0", "job-p0", "127.0.0.1");
  ASSERT_TRUE(left);
  EXPECT_EQ(left->status, QueueEntryStatus::kCancelled);
  EXPECT_EQ(queue_->Leave("p1", left->id, "127.0.0.1").error().api_code, "not_found");
  AddHost("h1");
  ASSERT_TRUE(queue_->Drain("spark-1x"));
  EXPECT_EQ(Status("p0"), "cancelled");
  EXPECT_EQ(Status("p1"), "launched");
}

}  // namespace
}  // namespace gpuwerk::sched
