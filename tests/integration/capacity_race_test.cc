// C15 over real HTTP: many people race for the last free hosts. No host is ever given twice
// (placements are UNIQUE(host_id), taken in one write transaction with the instance).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class CapacityRaceTest : public QueueFixture {};

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

}  // namespace
}  // namespace gpuwerk::testing
