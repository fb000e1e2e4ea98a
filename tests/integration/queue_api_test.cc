// The queue over real HTTP (R-5, R-6, R-11, R-12, R-16, issue 5) with fake agents: FIFO launch
// order (C16), passed-over entries, leaving, names and keys shared with instances, launch mails,
// failed launches put back, idempotent creates and queue history.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class QueueApiTest : public QueueFixture {};

/// The instance ids a person holds (live), in creation order.
std::vector<std::string> InstanceIds(HttpClient& who) {
  std::vector<std::string> out;
  const json list = who.Get("/api/v1/instances").Json();
  for (const auto& in : list["items"]) out.push_back(in["id"]);
  return out;
}

// C16: ten people queue in a known order; the one host frees again and again; launches follow
// queue order exactly; the one who left is never launched; the one who may not launch is passed
// over, keeps her place and is launched ahead of later entries once she may.
TEST_F(QueueApiTest, C16_LaunchesFollowQueueOrder) {
  AddHost("spark-a");
  Person blocker = NewPerson("blocker@example.test");
  auto first = Create(blocker, "blocker");
  ASSERT_EQ(first.status, 201) << first.body;

  std::vector<Person> people;
  // p5 may not launch (no payment method, R-14) until the operator records her card.
  for (int i = 0; i < 10; ++i) {
    people.push_back(NewPerson("p" + std::to_string(i) + "@example.test",
                               i == 5 ? Card::kNone : Card::kRecorded));
  }
  for (int i = 0; i < 10; ++i) {
    auto joined = Join(people[i], "job" + std::to_string(i));
    ASSERT_EQ(joined.status, 201) << joined.body;
    EXPECT_EQ(joined.Json()["position"], i + 1);
    EXPECT_EQ(joined.Json()["status"], "open");
  }
  // p3 leaves: everyone behind moves up one.
  auto mine = people[3].browser->Get("/api/v1/queue-entries").Json()["items"];
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(
      people[3].browser->Delete("/api/v1/queue-entries/" + mine[0]["id"].get<std::string>()).status,
      204);
  EXPECT_EQ(people[4].browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 4);

  // Free the host again and again: its holder deletes, the agent reports the container gone.
  Person* holder = &blocker;
  std::vector<std::string> order;
  for (int step = 0; step < 9; ++step) {
    const std::string on_host = InstanceOn("spark-a");
    ASSERT_FALSE(on_host.empty()) << "step " << step;
    ASSERT_EQ(holder->browser->Delete("/api/v1/instances/" + on_host).status, 204);
    ASSERT_EQ(Sync("spark-a").status, 200);  // container gone: delete final, host free, drain
    const std::string now_on = InstanceOn("spark-a");
    ASSERT_FALSE(now_on.empty()) << "nothing launched at step " << step;
    holder = nullptr;
    for (auto& p : people) {
      auto ids = InstanceIds(*p.browser);
      if (!ids.empty() && ids.back() == now_on) holder = &p;
    }
    ASSERT_NE(holder, nullptr);
    order.push_back(holder->email);
    // p5 may launch once p6 got its instance (she was passed over for it): her card is
    // recorded while the host is busy.
    if (holder->email == "p6@example.test") {
      ASSERT_TRUE(RecordCard(*op_, "p5@example.test"));
    }
  }
  EXPECT_EQ(order,
            (std::vector<std::string>{"p0@example.test", "p1@example.test", "p2@example.test",
                                      "p4@example.test", "p6@example.test", "p5@example.test",
                                      "p7@example.test", "p8@example.test", "p9@example.test"}));
  // The one who left was never launched; her history says cancelled.
  EXPECT_TRUE(InstanceIds(*people[3].browser).empty());
  auto history = people[3].browser->Get("/api/v1/usage/queue").Json();
  ASSERT_EQ(history["items"].size(), 1u);
  EXPECT_EQ(history["items"][0]["outcome"], "cancelled");
  EXPECT_TRUE(history["items"][0]["instance"].is_null());
  // The passed-over one was mailed once about it, and then about her launch.
  auto p5_mails = Mails("p5@example.test", 2);
  ASSERT_EQ(p5_mails.size(), 2u);
  int passed_over = 0, launched = 0;
  for (const auto& m : p5_mails) {
    if (m.subject.find("passed over") != std::string::npos) ++passed_over;
    if (m.subject.find("job5") != std::string::npos &&
        m.subject.find("starting") != std::string::npos)
      ++launched;
  }
  EXPECT_EQ(passed_over, 1);
  EXPECT_EQ(launched, 1);
}

TEST_F(QueueApiTest, LaunchMailNamesTheInstanceAndTheSshCommand) {
  Person alice = NewPerson("alice@example.test");
  // No host online: the queue is joined directly.
  auto joined = Join(alice, "trainer");
  ASSERT_EQ(joined.status, 201) << joined.body;
  EXPECT_EQ(joined.Json()["position"], 1);
  EXPECT_TRUE(Mails("alice@example.test", 0).empty());
  AddHost("spark-a");  // its first sync frees capacity: the entry is launched
  const std::string id = InstanceOn("spark-a");
  ASSERT_FALSE(id.empty());
  auto in = alice.browser->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(in["name"], "trainer");
  EXPECT_EQ(in["ssh_key"]["id"], alice.key_id);
  auto mails = Mails("alice@example.test", 1);
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_NE(mails[0].subject.find("trainer"), std::string::npos) << mails[0].subject;
  EXPECT_NE(mails[0].text_body.find("gpuwerk ssh trainer"), std::string::npos)
      << mails[0].text_body;
  EXPECT_NE(mails[0].text_body.find(in["hostname"].get<std::string>()), std::string::npos);
  auto entries = alice.browser->Get("/api/v1/queue-entries").Json();
  EXPECT_EQ(entries["total"], 0);
  auto history = alice.browser->Get("/api/v1/usage/queue").Json()["items"];
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0]["outcome"], "launched");
  EXPECT_EQ(history[0]["instance"]["id"], id);
}

TEST_F(QueueApiTest, JoiningWithAFreeHostLaunchesAtOnce) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  auto joined = Join(alice, "now");
  ASSERT_EQ(joined.status, 201) << joined.body;
  EXPECT_EQ(joined.Json()["status"], "launched");
  EXPECT_EQ(joined.Json()["instance_id"], InstanceOn("spark-a"));
}

TEST_F(QueueApiTest, OneOpenEntryPerTypeAndClearErrors) {
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  auto first = Join(alice, "one");
  ASSERT_EQ(first.status, 201);
  auto again = Join(alice, "two");
  ExpectProblem(again, 409, "already_queued");
  EXPECT_EQ(again.Json()["queue_entry_id"], first.Json()["id"]);
  ExpectProblem(Join(alice, "two", "spark-9x"), 400, "unknown_gpu_type");
  ExpectProblem(Join(alice, "Not_A_Label", "spark-2x"), 400, "invalid_name");
  auto too_long = Join(alice, std::string(300, 'a'), "spark-2x");
  ExpectProblem(too_long, 400, "invalid_name");
  EXPECT_THAT(too_long.Json()["detail"].get<std::string>(), ::testing::HasSubstr("1 to 63"));
  ExpectProblem(
      alice.browser->PostJson("/api/v1/queue-entries", {{"name", "x"}, {"ssh_key_id", bob.key_id}}),
      404, "not_found");
  // Another type is another queue.
  EXPECT_EQ(Join(alice, "two", "spark-2x").status, 201);
  EXPECT_EQ(alice.browser->Get("/api/v1/queue-entries").Json()["total"], 2);
  // Paged like every list: a page past the end is empty, page 0 is refused.
  auto past = alice.browser->Get("/api/v1/queue-entries?page=2").Json();
  EXPECT_TRUE(past["items"].empty());
  EXPECT_EQ(past["page"], 2);
  EXPECT_EQ(past["pages"], 1);
  EXPECT_EQ(past["total"], 2);
  ExpectProblem(alice.browser->Get("/api/v1/queue-entries?page=0"), 400, "invalid_page");
  // Another person's entry: not found, untouched.
  const std::string id = first.Json()["id"];
  ExpectProblem(bob.browser->Delete("/api/v1/queue-entries/" + id), 404, "not_found");
  EXPECT_EQ(alice.browser->Get("/api/v1/queue-entries").Json()["total"], 2);
  EXPECT_EQ(alice.browser->Delete("/api/v1/queue-entries/" + id).status, 204);
  ExpectProblem(alice.browser->Delete("/api/v1/queue-entries/" + id), 404, "not_found");
  // Left: the type may be joined again, at the back.
  auto back = Join(alice, "three");
  ASSERT_EQ(back.status, 201);
  EXPECT_EQ(back.Json()["position"], 1);
}

TEST_F(QueueApiTest, NamesAreUniqueAcrossInstancesAndOpenEntries) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  ASSERT_EQ(Create(alice, "alpha").status, 201);
  ExpectProblem(Join(alice, "alpha"), 409, "name_taken");
  ASSERT_EQ(Join(alice, "beta", "spark-2x").status, 201);  // no spark-2x host: it waits
  ExpectProblem(Join(alice, "beta"), 409, "name_taken");
  ExpectProblem(Create(alice, "beta"), 409, "name_taken");
  // Another person may use the names.
  Person bob = NewPerson("bob@example.test");
  EXPECT_EQ(Join(bob, "beta").status, 201);
}

TEST_F(QueueApiTest, KeyHeldByAnOpenEntryCannotBeDeleted) {
  Person alice = NewPerson("alice@example.test");
  auto joined = Join(alice, "waiting");
  ASSERT_EQ(joined.status, 201);
  auto refused = alice.browser->Delete("/api/v1/ssh-keys/" + alice.key_id);
  ExpectProblem(refused, 409, "key_in_use");
  ASSERT_EQ(refused.Json()["queue_entries"].size(), 1u);
  EXPECT_EQ(refused.Json()["queue_entries"][0]["name"], "waiting");
  EXPECT_NE(refused.Json()["detail"].get<std::string>().find("waiting"), std::string::npos);
  ASSERT_EQ(alice.browser->Delete("/api/v1/queue-entries/" + joined.Json()["id"].get<std::string>())
                .status,
            204);
  EXPECT_EQ(alice.browser->Delete("/api/v1/ssh-keys/" + alice.key_id).status, 204);
}

TEST_F(QueueApiTest, DirectCreateDoesNotJumpTheQueue) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  ASSERT_EQ(Create(alice, "first").status, 201);
  ASSERT_EQ(Join(bob, "waiting").status, 201);
  auto full = Create(alice, "second");
  ExpectProblem(full, 409, "no_capacity");
  EXPECT_EQ(full.Json()["queue"]["offer"], true);
  EXPECT_EQ(full.Json()["queue"]["path"], "/api/v1/queue-entries");
  auto types = alice.browser->Get("/api/v1/gpu-types").Json()["items"];
  ASSERT_FALSE(types.empty());
  EXPECT_EQ(types[0]["name"], "spark-1x");
  EXPECT_EQ(types[0]["free_capacity"], 0);
  EXPECT_EQ(types[0]["queued"], 1);
}

// A launch that fails on the host frees it and puts the entry back at its old place with the
// failure recorded; the next drain launches it again.
TEST_F(QueueApiTest, FailedLaunchPutsTheEntryBack) {
  AddHost("spark-a");
  Person blocker = NewPerson("blocker@example.test");
  ASSERT_EQ(Create(blocker, "blocker").status, 201);
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  ASSERT_EQ(Join(alice, "a").status, 201);
  ASSERT_EQ(Join(bob, "b").status, 201);
  // Host spark-a goes to alice and is freed at once by a failed create; alice stays first. While
  // neither has a payment method the freed host stays free; alice's card launches her entry.
  ASSERT_TRUE(ClearCard(*op_, "alice@example.test"));
  ASSERT_TRUE(ClearCard(*op_, "bob@example.test"));
  ASSERT_EQ(blocker.browser->Delete("/api/v1/instances/" + InstanceOn("spark-a")).status, 204);
  ASSERT_EQ(Sync("spark-a").status, 200);
  EXPECT_EQ(InstanceOn("spark-a"), "");
  ASSERT_TRUE(RecordCard(*op_, "alice@example.test"));
  ASSERT_TRUE(RecordCard(*op_, "bob@example.test"));
  ASSERT_TRUE(app_->DrainQueuesNow());
  const std::string failed_id = InstanceOn("spark-a");
  ASSERT_FALSE(failed_id.empty());
  ASSERT_EQ(InstanceIds(*alice.browser), std::vector<std::string>{failed_id});
  // The failure: alice's entry is open again at position 1 (the operator drains the host first
  // so that nothing is launched on it before the test looks).
  ASSERT_EQ(op_->PostJson("/api/v1/admin/hosts/spark-a/drain", json::object()).status, 200);
  auto r = Sync("spark-a", json::array(),
                json::array({{{"instance_id", failed_id},
                              {"node_index", 0},
                              {"code", "engine_error"},
                              {"message", "create: image not found"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  auto entry = alice.browser->Get("/api/v1/queue-entries").Json()["items"];
  ASSERT_EQ(entry.size(), 1u);
  EXPECT_EQ(entry[0]["position"], 1);
  EXPECT_EQ(entry[0]["status"], "open");
  EXPECT_NE(entry[0]["last_failure"].get<std::string>().find("image not found"), std::string::npos);
  EXPECT_EQ(bob.browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 2);
  EXPECT_EQ(alice.browser->Get("/api/v1/instances/" + failed_id).Json()["status"], "failed");
  // Undraining frees capacity: alice is launched again (a new instance).
  ASSERT_EQ(op_->PostJson("/api/v1/admin/hosts/spark-a/undrain", json::object()).status, 200);
  const std::string again = InstanceOn("spark-a");
  ASSERT_FALSE(again.empty());
  EXPECT_NE(again, failed_id);
  // The failed instance made way for the new one with the same name.
  EXPECT_EQ(InstanceIds(*alice.browser), std::vector<std::string>{again});
  EXPECT_EQ(alice.browser->Get("/api/v1/instances/" + again).Json()["name"], "a");
  EXPECT_EQ(bob.browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 1);
}

// C13: a launch from the queue fails in the GPU runtime ("unknown or invalid runtime name:
// nvidia"). The capacity is freed, the entry goes back to its place (first, ahead of the entry
// queued after it) with the failure recorded, its owner sees why on the failed instance, and the
// host is degraded: no drain launches on it until the operator undrains it after the fix.
TEST_F(QueueApiTest, C13_GpuRuntimeFailurePutsTheQueueEntryBackAtItsPlace) {
  AddHost("spark-a");
  Person blocker = NewPerson("blocker@example.test");
  ASSERT_EQ(Create(blocker, "blocker").status, 201);
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  ASSERT_EQ(Join(alice, "a").status, 201);
  ASSERT_EQ(Join(bob, "b").status, 201);
  // The blocker leaves; once its container is gone the drain launches alice's entry on spark-a.
  ASSERT_EQ(blocker.browser->Delete("/api/v1/instances/" + InstanceOn("spark-a")).status, 204);
  ASSERT_EQ(Sync("spark-a").status, 200);
  const std::string failed_id = InstanceOn("spark-a");
  ASSERT_FALSE(failed_id.empty());
  ASSERT_EQ(InstanceIds(*alice.browser), std::vector<std::string>{failed_id});
  EXPECT_TRUE(alice.browser->Get("/api/v1/queue-entries").Json()["items"].empty());
  EXPECT_EQ(bob.browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 1);

  auto r = Sync("spark-a", json::array(),
                json::array({{{"instance_id", failed_id},
                              {"node_index", 0},
                              {"code", "engine_error"},
                              {"message", "start: unknown or invalid runtime name: nvidia"}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  // The capacity is freed and alice's entry is back at its place, with the failure recorded.
  EXPECT_EQ(InstanceOn("spark-a"), "");
  auto entry = alice.browser->Get("/api/v1/queue-entries").Json()["items"];
  ASSERT_EQ(entry.size(), 1u);
  EXPECT_EQ(entry[0]["status"], "open");
  EXPECT_EQ(entry[0]["position"], 1);
  EXPECT_NE(entry[0]["last_failure"].get<std::string>().find("runtime name: nvidia"),
            std::string::npos)
      << entry[0];
  EXPECT_EQ(bob.browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 2);
  // She sees why on the failed instance.
  const json failed = alice.browser->Get("/api/v1/instances/" + failed_id).Json();
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_NE(failed["status_reason"].get<std::string>().find("unknown or invalid runtime name"),
            std::string::npos)
      << failed;
  // The host is degraded: a drain launches nothing on it, and the entries keep their places.
  EXPECT_NE(HostItem("spark-a")["degraded_reason"].get<std::string>().find("GPU runtime failed"),
            std::string::npos);
  ASSERT_EQ(Sync("spark-a").status, 200);
  ASSERT_TRUE(app_->DrainQueuesNow());
  EXPECT_EQ(InstanceOn("spark-a"), "");
  EXPECT_EQ(alice.browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 1);
  EXPECT_EQ(bob.browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 2);
  // Fixed and undrained: alice, first in line, is launched again (a new instance named "a").
  ASSERT_EQ(op_->PostJson("/api/v1/admin/hosts/spark-a/undrain", json::object()).status, 200);
  const std::string again = InstanceOn("spark-a");
  ASSERT_FALSE(again.empty());
  EXPECT_NE(again, failed_id);
  EXPECT_EQ(InstanceIds(*alice.browser), std::vector<std::string>{again});
  EXPECT_EQ(alice.browser->Get("/api/v1/instances/" + again).Json()["name"], "a");
  EXPECT_EQ(bob.browser->Get("/api/v1/queue-entries").Json()["items"][0]["position"], 1);
}

TEST_F(QueueApiTest, IdempotencyKeyMakesOneInstance) {
  AddHost("spark-a");
  AddHost("spark-b");
  Person alice = NewPerson("alice@example.test");
  const std::vector<std::string> key = {"Idempotency-Key: create-alpha-1"};
  auto first = Create(alice, "alpha", key);
  ASSERT_EQ(first.status, 201) << first.body;
  auto second = Create(alice, "alpha", key);
  ASSERT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(second.Json()["id"], first.Json()["id"]);
  EXPECT_EQ(second.Header("idempotent-replayed"), "true");
  EXPECT_EQ(InstanceIds(*alice.browser).size(), 1u);
  // The same key for another request is refused; a new key is a new request.
  ExpectProblem(Create(alice, "beta", key), 409, "idempotency_key_reused");
  ExpectProblem(Create(alice, "alpha", {"Idempotency-Key: create-alpha-2"}), 409, "name_taken");
  ExpectProblem(Create(alice, "alpha", {"Idempotency-Key: " + std::string(300, 'k')}), 400,
                "invalid_idempotency_key");
  // Another person's same key is theirs.
  Person bob = NewPerson("bob@example.test");
  auto bobs = Create(bob, "alpha", key);
  ASSERT_EQ(bobs.status, 201) << bobs.body;
  EXPECT_NE(bobs.Json()["id"], first.Json()["id"]);
  // After 24 hours the key is forgotten: the request is made anew (and the name is taken).
  clock_.Advance(std::chrono::hours(24) + std::chrono::seconds(1));
  Sync("spark-a");
  Sync("spark-b");
  ExpectProblem(Create(alice, "alpha", key), 409, "name_taken");
}

// C14: a retried create (the same request sent again after the instance was deleted, e.g. by a
// client that never saw the first answer) and a restart from a stale tab create nothing: the retry
// answers the first request's answer again, the restart 409/404, and no instance, placement or
// container comes back.
TEST_F(QueueApiTest, C14_ARetriedCreateOrAStaleRestartAfterTheDeleteCreatesNothing) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  const std::vector<std::string> key = {"Idempotency-Key: c14-retry"};
  auto first = Create(alice, "alpha", key);
  ASSERT_EQ(first.status, 201) << first.body;
  const std::string id = first.Json()["id"];
  const json running = {{"instance_id", id},  {"node_index", 0},   {"container_id", "c-" + id},
                        {"state", "running"}, {"exit_code", 0},    {"started_at", ""},
                        {"ssh_port", 40001},  {"ssh_ready", true}, {"restart_generation", 0},
                        {"error", ""}};
  ASSERT_EQ(Sync("spark-a", json::array({running})).status, 200);
  ASSERT_EQ(alice.browser->Delete("/api/v1/instances/" + id).status, 204);
  ASSERT_EQ(Sync("spark-a", json::array({running})).status, 200);  // the container still runs
  // Deleting, container still reported: a stale restart is refused.
  ExpectProblem(alice.browser->PostJson("/api/v1/instances/" + id + "/restart", json::object()),
                409, "instance_deleting");
  auto retried = Create(alice, "alpha", key);
  EXPECT_EQ(retried.status, 201) << retried.body;
  EXPECT_EQ(retried.Json()["id"], id) << "the retry is answered, not carried out again";
  EXPECT_EQ(retried.Header("idempotent-replayed"), "true");
  // The container is reported gone: the instance is finalized, and nothing is wanted on the host.
  auto synced = Sync("spark-a");
  ASSERT_EQ(synced.status, 200) << synced.body;
  EXPECT_TRUE(synced.Json()["desired"].empty()) << synced.body;
  auto again = Create(alice, "alpha", key);
  EXPECT_EQ(again.Json()["id"], id);
  ExpectProblem(alice.browser->PostJson("/api/v1/instances/" + id + "/restart", json::object()),
                404, "not_found");
  EXPECT_TRUE(InstanceIds(*alice.browser).empty());
  EXPECT_TRUE(Sync("spark-a").Json()["desired"].empty());
}

TEST_F(QueueApiTest, DoubleSubmittedCreateMakesOneInstance) {
  AddHost("spark-a");
  AddHost("spark-b");
  Person alice = NewPerson("alice@example.test");
  // Both requests race from their own signed-in connections.
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(Browser());
    ASSERT_EQ(clients.back()
                  ->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                    {"password", "correct horse battery"}})
                  .status,
              200);
  }
  std::vector<HttpResult> results(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      HttpClient& c = *clients[i];
      results[i] =
          c.PostJson("/api/v1/instances",
                     {{"name", "alpha"}, {"ssh_key_id", alice.key_id}, {"gpu_type", "spark-1x"}},
                     {"Idempotency-Key: double-submit"});
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(results[0].status, 201) << results[0].body;
  ASSERT_EQ(results[1].status, 201) << results[1].body;
  EXPECT_EQ(results[0].Json()["id"], results[1].Json()["id"]);
  EXPECT_EQ(InstanceIds(*alice.browser).size(), 1u);
}

TEST_F(QueueApiTest, QueueHistoryIsPagedOldestFirst) {
  Person alice = NewPerson("alice@example.test");
  for (int i = 0; i < 17; ++i) {
    auto joined = Join(alice, "e" + std::to_string(i));
    ASSERT_EQ(joined.status, 201) << joined.body;
    clock_.Advance(std::chrono::seconds(10 + i));
    ASSERT_EQ(
        alice.browser->Delete("/api/v1/queue-entries/" + joined.Json()["id"].get<std::string>())
            .status,
        204);
  }
  auto open = Join(alice, "still-waiting");
  ASSERT_EQ(open.status, 201);
  clock_.Advance(std::chrono::seconds(5));
  auto page1 = alice.browser->Get("/api/v1/usage/queue").Json();
  EXPECT_EQ(page1["total"], 18);
  EXPECT_EQ(page1["pages"], 2);
  EXPECT_EQ(page1["page"], 1);
  ASSERT_EQ(page1["items"].size(), 15u);
  EXPECT_EQ(page1["items"][0]["name"], "e0");
  EXPECT_EQ(page1["items"][0]["wait_seconds"], 10);
  EXPECT_EQ(page1["items"][0]["outcome"], "cancelled");
  EXPECT_TRUE(page1["items"][0]["left_at"].is_string());
  EXPECT_EQ(page1["items"][14]["name"], "e14");
  auto page2 = alice.browser->Get("/api/v1/usage/queue?page=2").Json();
  ASSERT_EQ(page2["items"].size(), 3u);
  EXPECT_EQ(page2["items"][0]["name"], "e15");
  EXPECT_EQ(page2["items"][2]["name"], "still-waiting");
  EXPECT_EQ(page2["items"][2]["outcome"], "waiting");
  EXPECT_EQ(page2["items"][2]["wait_seconds"], 5);
  EXPECT_EQ(alice.browser->Get("/api/v1/usage/queue?page=3").Json()["items"].size(), 0u);
  ExpectProblem(alice.browser->Get("/api/v1/usage/queue?page=0"), 400, "invalid_page");
  // Someone else's history is not shown.
  Person bob = NewPerson("bob@example.test");
  EXPECT_EQ(bob.browser->Get("/api/v1/usage/queue").Json()["total"], 0);
}

}  // namespace
}  // namespace gpuwerk::testing
