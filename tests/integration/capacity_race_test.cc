// C15 over real HTTP: many people race for the last free hosts, or for a host whose instance is
// being torn down. No host is ever given twice (placements are UNIQUE(host_id), taken in one write
// transaction with the instance, and a deleted instance's placement is held until its agent
// reports the container gone); store and engine are checked against each other on every sync.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class CapacityRaceTest : public QueueFixture {
 protected:
  /// A running, ready container of instance `id` as an agent reports it.
  static json Running(const std::string& id) {
    return {{"instance_id", id},  {"node_index", 0},   {"container_id", "c-" + id},
            {"state", "running"}, {"exit_code", 0},    {"started_at", ""},
            {"ssh_port", 40001},  {"ssh_ready", true}, {"restart_generation", 0},
            {"error", ""}};
  }
  /// How many audit events `action` has on `target`.
  int64_t Audits(const std::string& action, const std::string& target) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row, tx.QueryOne("SELECT COUNT(*) FROM audit_events WHERE action = ? AND target = ?",
                                {action, target}));
      return row->Int(0);
    });
    EXPECT_TRUE(n) << n.error().message;
    return n.value_or(-1);
  }
  /// Has everyone in `people` create an instance named `name` at once; returns the answers.
  std::vector<HttpResult> CreateAtOnce(std::vector<Person>& people, const std::string& name) {
    std::vector<HttpResult> results(people.size());
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (size_t i = 0; i < people.size(); ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        results[i] = Create(people[i], name);
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    return results;
  }
};

/// The instances created among `results` (201s); every other answer must be no_capacity.
std::vector<std::string> Winners(const std::vector<HttpResult>& results) {
  std::vector<std::string> ids;
  for (const auto& r : results) {
    if (r.status == 201) {
      ids.push_back(r.Json()["id"]);
    } else {
      EXPECT_EQ(r.status, 409) << r.body;
      EXPECT_EQ(r.Code(), "no_capacity") << r.body;
    }
  }
  return ids;
}

TEST_F(CapacityRaceTest, C15_FiftyConcurrentCreatesAgainstThreeFreeHosts) {
  constexpr int kPeople = 50;
  std::vector<Person> people;
  for (int i = 0; i < kPeople; ++i) {
    // Sign-ups are limited to 30 an hour per address; everyone here comes from 127.0.0.1.
    if (i > 0 && i % 25 == 0) clock_.Advance(std::chrono::hours(1) + std::chrono::seconds(1));
    people.push_back(NewPerson("racer" + std::to_string(i) + "@example.test"));
    ASSERT_FALSE(people.back().key_id.empty());
  }
  for (const char* h : {"spark-a", "spark-b", "spark-c"}) AddHost(h);
  std::vector<HttpResult> results(kPeople);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kPeople; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      results[i] = Create(people[i], "race");
    });
  }
  while (ready.load() < kPeople) std::this_thread::yield();
  go = true;
  for (auto& t : threads) t.join();

  int created = 0, no_capacity = 0;
  std::set<std::string> instance_ids;
  for (const auto& r : results) {
    if (r.status == 201) {
      ++created;
      instance_ids.insert(r.Json()["id"].get<std::string>());
      EXPECT_EQ(r.Json()["hosts"].size(), 1u);
    } else {
      EXPECT_EQ(r.status, 409) << r.body;
      EXPECT_EQ(r.Code(), "no_capacity") << r.body;
      if (r.Code() == "no_capacity") ++no_capacity;
    }
  }
  EXPECT_EQ(created, 3);
  EXPECT_EQ(no_capacity, kPeople - 3);
  // From the store: each host holds exactly one of the three instances, and nobody holds more.
  std::set<std::string> on_hosts;
  for (const char* h : {"spark-a", "spark-b", "spark-c"}) on_hosts.insert(InstanceOn(h));
  EXPECT_EQ(on_hosts, instance_ids);
  int live = 0;
  for (auto& p : people) live += p.browser->Get("/api/v1/instances").Json()["total"].get<int>();
  EXPECT_EQ(live, 3);
  // And from each host's agent view: one desired container per host.
  for (const char* h : {"spark-a", "spark-b", "spark-c"}) {
    auto desired = Sync(h).Json()["desired"];
    ASSERT_EQ(desired.size(), 1u) << h;
    EXPECT_TRUE(instance_ids.contains(desired[0]["instance_id"].get<std::string>()));
  }
}

// C15, a teardown racing launches: alice deletes alpha while ten people create at once and
// spark-a's agent keeps reporting alpha's container (the engine is still removing it). Nobody
// gets spark-a while that container runs; one gets the other free host; once the agent reports
// the container gone, exactly one more gets spark-a. Then the engine and the store disagree: the
// agent reports alpha's container again beside the new instance's (a removal the engine did not
// carry out). spark-a is degraded with a reason naming it, audited once however many rounds it
// lasts, and takes no new instance even when free, until the container is gone.
TEST_F(CapacityRaceTest, C15_TeardownRacingLaunchesNeverSharesAHostAndStrayContainersDegradeIt) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  auto alpha = Create(alice, "alpha");
  ASSERT_EQ(alpha.status, 201) << alpha.body;
  const std::string alpha_id = alpha.Json()["id"];
  ASSERT_EQ(Sync("spark-a", json::array({Running(alpha_id)})).status, 200);
  AddHost("spark-b");
  const std::string spark_a = HostItem("spark-a")["id"];
  std::vector<Person> people;
  for (int i = 0; i < 10; ++i) {
    people.push_back(NewPerson("racer" + std::to_string(i) + "@example.test"));
  }

  // The race: the delete, the launches and the agent's rounds all at once.
  std::atomic<bool> stop_agent{false};
  std::atomic<int> rounds{0};
  std::thread agent([&] {
    while (!stop_agent.load()) {
      EXPECT_EQ(Sync("spark-a", json::array({Running(alpha_id)})).status, 200);
      ++rounds;
    }
  });
  HttpResult deleted;
  std::thread teardown([&] { deleted = alice.browser->Delete("/api/v1/instances/" + alpha_id); });
  const std::vector<std::string> first = Winners(CreateAtOnce(people, "race"));
  teardown.join();
  while (rounds.load() < 3) std::this_thread::yield();  // rounds after the delete too
  stop_agent = true;
  agent.join();
  EXPECT_EQ(deleted.status, 204) << deleted.body;
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(InstanceOn("spark-b"), first[0]);
  EXPECT_EQ(InstanceOn("spark-a"), alpha_id)
      << "spark-a was given away while alpha's container ran";
  EXPECT_EQ(alice.browser->Get("/api/v1/instances/" + alpha_id).Json()["status"], "deleting");
  EXPECT_EQ(TypeItem(*op_, "spark-1x")["free_capacity"], 0);
  EXPECT_EQ(HostItem("spark-a")["degraded_reason"], "");  // a held placement is no disagreement

  // The engine is done: the container is gone, the delete final, spark-a free for exactly one.
  ASSERT_EQ(Sync("spark-a").status, 200);
  EXPECT_EQ(InstanceOn("spark-a"), "");
  EXPECT_EQ(TypeItem(*op_, "spark-1x")["free_capacity"], 1);
  std::vector<Person> losers;
  for (auto& p : people) {
    if (p.browser->Get("/api/v1/instances").Json()["total"] == 0) losers.push_back(std::move(p));
  }
  ASSERT_EQ(losers.size(), 9u);
  const std::vector<std::string> second = Winners(CreateAtOnce(losers, "race"));
  ASSERT_EQ(second.size(), 1u);
  const std::string beta_id = second[0];
  EXPECT_EQ(InstanceOn("spark-a"), beta_id);
  EXPECT_EQ(TypeItem(*op_, "spark-1x")["free_capacity"], 0);
  EXPECT_EQ(Audits("host.degraded", spark_a), 0);

  // The engine runs alpha's container after all: three rounds, one change of state.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Sync("spark-a", json::array({Running(beta_id), Running(alpha_id)})).status, 200);
  }
  std::string reason = HostItem("spark-a")["degraded_reason"];
  EXPECT_TRUE(
      reason.starts_with("store and engine disagree: the engine runs 1 gpuwerk container "
                         "that the store has not placed on this host"))
      << reason;
  EXPECT_NE(reason.find(alpha_id), std::string::npos) << reason;
  EXPECT_EQ(Audits("host.degraded", spark_a), 1);
  // Its own instance is unaffected.
  auto beta_owner = std::find_if(losers.begin(), losers.end(), [&](Person& p) {
    return p.browser->Get("/api/v1/instances").Json()["total"] == 1;
  });
  ASSERT_NE(beta_owner, losers.end());
  EXPECT_EQ(beta_owner->browser->Get("/api/v1/instances/" + beta_id).Json()["status"], "running");
  // beta ends; spark-a is free in the store but its engine still runs alpha's container: no
  // launch takes it.
  ASSERT_EQ(beta_owner->browser->Delete("/api/v1/instances/" + beta_id).status, 204);
  ASSERT_EQ(Sync("spark-a", json::array({Running(alpha_id)})).status, 200);
  EXPECT_EQ(InstanceOn("spark-a"), "");
  EXPECT_EQ(TypeItem(*op_, "spark-1x")["free_capacity"], 0);
  auto refused = Create(*beta_owner, "again");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_EQ(refused.Code(), "no_capacity") << refused.body;
  EXPECT_EQ(Audits("host.degraded", spark_a), 1);

  // The stray container is removed: spark-a takes instances again; the clearance audited once.
  ASSERT_EQ(Sync("spark-a").status, 200);
  ASSERT_EQ(Sync("spark-a").status, 200);
  EXPECT_EQ(HostItem("spark-a")["degraded_reason"], "");
  EXPECT_EQ(Audits("host.degraded_cleared", spark_a), 1);
  EXPECT_EQ(TypeItem(*op_, "spark-1x")["free_capacity"], 1);
  auto again = Create(*beta_owner, "again");
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(InstanceOn("spark-a"), again.Json()["id"]);
}

}  // namespace
}  // namespace gpuwerk::testing
