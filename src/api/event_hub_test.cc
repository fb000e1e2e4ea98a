// EventHub against a scripted Reader and an in-memory ResponseStream: the SSE framing, the
// snapshot, change detection, ended items, the wake sources, heartbeats and the limits. The
// whole path over real HTTP is tests/integration/events_api_test.cc.
#include "api/event_hub.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

#include "sched/desired_state_notifier.h"

namespace gpuwerk::api {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

/// A ResponseStream that keeps what is written.
class FakeStream : public ResponseStream {
 public:
  bool Write(std::string bytes) override {
    std::lock_guard lock(mu_);
    if (ended_) return false;
    data_ += bytes;
    cv_.notify_all();
    return true;
  }
  void End() override {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(mu_);
      if (ended_) return;
      ended_ = true;
      callbacks.swap(on_end_);
      cv_.notify_all();
    }
    for (auto& f : callbacks) f();
  }
  bool ended() const override {
    std::lock_guard lock(mu_);
    return ended_;
  }
  void OnEnd(std::function<void()> f) override {
    {
      std::lock_guard lock(mu_);
      if (!ended_) {
        on_end_.push_back(std::move(f));
        return;
      }
    }
    f();
  }
  /// Waits up to 5 s until what was written contains `text` (after `from`); returns its offset
  /// or npos.
  size_t WaitFor(std::string_view text, size_t from = 0) {
    std::unique_lock lock(mu_);
    size_t at = std::string::npos;
    cv_.wait_for(lock, std::chrono::seconds(5),
                 [&] { return (at = data_.find(text, from)) != std::string::npos; });
    return at;
  }
  std::string data() const {
    std::lock_guard lock(mu_);
    return data_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string data_;
  bool ended_ = false;
  std::vector<std::function<void()>> on_end_;
};

/// What the scripted Reader answers: per person, items live and items ended.
class World {
 public:
  void SetLive(const std::string& person, const std::string& kind, const std::string& id, json j) {
    std::lock_guard lock(mu_);
    auto& items = live_[person];
    for (auto& item : items) {
      if (item.kind == kind && item.id == id) {
        item.json = std::move(j);
        return;
      }
    }
    items.push_back({kind, id, std::move(j)});
  }
  void End(const std::string& person, const std::string& kind, const std::string& id, json j) {
    std::lock_guard lock(mu_);
    auto& items = live_[person];
    std::erase_if(items, [&](const EventItem& i) { return i.kind == kind && i.id == id; });
    ended_[person].push_back({kind, id, std::move(j)});
  }
  EventHub::Reader Reader() {
    return [this](const std::string& person,
                  const std::vector<std::pair<std::string, std::string>>& known)
               -> core::Result<PersonItems> {
      std::lock_guard lock(mu_);
      ++reads_[person];
      if (fail_) return core::Internal("store away");
      PersonItems items;
      items.live = live_[person];
      for (const auto& e : ended_[person]) {
        for (const auto& [kind, id] : known) {
          if (kind == e.kind && id == e.id) items.ended.push_back(e);
        }
      }
      return items;
    };
  }
  int reads(const std::string& person) {
    std::lock_guard lock(mu_);
    return reads_[person];
  }
  void SetFailing(bool fail) {
    std::lock_guard lock(mu_);
    fail_ = fail;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<EventItem>> live_;
  std::map<std::string, std::vector<EventItem>> ended_;
  std::map<std::string, int> reads_;
  bool fail_ = false;
};

/// Options with a recheck too slow to matter unless a test asks for it.
EventHub::Options SlowOptions() {
  EventHub::Options o;
  o.recheck_interval = std::chrono::seconds(60);
  o.heartbeat_interval = std::chrono::seconds(60);
  o.min_pass_interval = milliseconds(1);
  return o;
}

std::shared_ptr<FakeStream> OpenStream(EventHub& hub, const std::string& person) {
  auto producer = hub.Open(person, /*email_proven=*/true);
  EXPECT_TRUE(producer) << (producer ? "" : producer.error().message);
  if (!producer) return nullptr;
  auto stream = std::make_shared<FakeStream>();
  (*producer)(stream);
  return stream;
}

TEST(EventHubTest, SnapshotThenOnlyWhatChanged) {
  World world;
  world.SetLive("p1", "instance", "ins_1", {{"id", "ins_1"}, {"status", "provisioning"}});
  world.SetLive("p1", "queue_entry", "qen_1", {{"id", "qen_1"}, {"position", 2}});
  EventHub hub(world.Reader(), SlowOptions());
  auto s = OpenStream(hub, "p1");
  ASSERT_TRUE(s);
  ASSERT_NE(s->WaitFor("event: snapshot"), std::string::npos);
  EXPECT_EQ(s->data(),
            "retry: 3000\n\n"
            "id: 1\nevent: snapshot\ndata: "
            R"({"instances":[{"id":"ins_1","status":"provisioning"}],)"
            R"("queue_entries":[{"id":"qen_1","position":2}]})"
            "\n\n");

  // A wake with nothing changed sends nothing.
  const int reads = world.reads("p1");
  hub.Wake();
  for (int i = 0; i < 100 && world.reads("p1") == reads; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_GT(world.reads("p1"), reads);
  const size_t after_snapshot = s->data().size();

  world.SetLive("p1", "instance", "ins_1", {{"id", "ins_1"}, {"status", "running"}});
  hub.Wake();
  size_t at = s->WaitFor("event: instance", after_snapshot);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(s->data().substr(after_snapshot),
            "id: 2\nevent: instance\ndata: {\"id\":\"ins_1\",\"status\":\"running\"}\n\n");

  // The entry moves up; a new instance appears: one write, in the Reader's order, ids go on.
  world.SetLive("p1", "queue_entry", "qen_1", {{"id", "qen_1"}, {"position", 1}});
  world.SetLive("p1", "instance", "ins_2", {{"id", "ins_2"}, {"status", "provisioning"}});
  const size_t before = s->data().size();
  hub.Wake();
  ASSERT_NE(s->WaitFor("ins_2", before), std::string::npos);
  EXPECT_EQ(s->data().substr(before),
            "id: 3\nevent: queue_entry\ndata: {\"id\":\"qen_1\",\"position\":1}\n\n"
            "id: 4\nevent: instance\ndata: {\"id\":\"ins_2\",\"status\":\"provisioning\"}\n\n");

  // Ended: the last event is the item as it ended; nothing about it after that.
  world.End("p1", "queue_entry", "qen_1", {{"id", "qen_1"}, {"status", "cancelled"}});
  world.End("p1", "instance", "ins_1", {{"id", "ins_1"}, {"status", "deleted"}});
  const size_t before_end = s->data().size();
  hub.Wake();
  ASSERT_NE(s->WaitFor("cancelled", before_end), std::string::npos);
  ASSERT_NE(s->WaitFor("deleted", before_end), std::string::npos);
  const size_t after_end = s->data().size();
  hub.Wake();
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(s->data().size(), after_end);
}

TEST(EventHubTest, EachPersonSeesOnlyTheirOwn) {
  World world;
  world.SetLive("alice", "instance", "ins_a", {{"id", "ins_a"}, {"status", "running"}});
  world.SetLive("bob", "instance", "ins_b", {{"id", "ins_b"}, {"status", "running"}});
  EventHub hub(world.Reader(), SlowOptions());
  auto a = OpenStream(hub, "alice");
  auto b = OpenStream(hub, "bob");
  ASSERT_NE(a->WaitFor("snapshot"), std::string::npos);
  ASSERT_NE(b->WaitFor("snapshot"), std::string::npos);
  world.SetLive("bob", "instance", "ins_b", {{"id", "ins_b"}, {"status", "exited"}});
  hub.Wake();
  ASSERT_NE(b->WaitFor("exited"), std::string::npos);
  EXPECT_EQ(a->data().find("ins_b"), std::string::npos);
  EXPECT_EQ(b->data().find("ins_a"), std::string::npos);
}

TEST(EventHubTest, PeriodicRecheckAndHeartbeatWithoutAnyWake) {
  World world;
  world.SetLive("p1", "instance", "ins_1", {{"status", "running"}});
  EventHub::Options o = SlowOptions();
  o.recheck_interval = milliseconds(100);
  o.heartbeat_interval = milliseconds(200);
  EventHub hub(world.Reader(), o);
  auto s = OpenStream(hub, "p1");
  ASSERT_NE(s->WaitFor("snapshot"), std::string::npos);
  world.SetLive("p1", "instance", "ins_1", {{"status", "unknown"}});  // no Wake()
  EXPECT_NE(s->WaitFor("unknown"), std::string::npos);
  const size_t at = s->data().size();
  EXPECT_NE(s->WaitFor(": keep-alive\n\n", at), std::string::npos);
}

TEST(EventHubTest, NotifierListenerWakesTheHub) {
  World world;
  world.SetLive("p1", "instance", "ins_1", {{"status", "provisioning"}});
  sched::DesiredStateNotifier notifier;
  {
    EventHub hub(world.Reader(), SlowOptions());
    hub.ListenTo(notifier);
    auto s = OpenStream(hub, "p1");
    ASSERT_NE(s->WaitFor("snapshot"), std::string::npos);
    world.SetLive("p1", "instance", "ins_1", {{"status", "restarting"}});
    notifier.Notify({"spark-a"});
    EXPECT_NE(s->WaitFor("restarting"), std::string::npos);
    hub.Shutdown();
    EXPECT_TRUE(s->ended());
  }
  notifier.Notify({"spark-a"});  // the listener is gone with the hub
}

TEST(EventHubTest, AReadFailureIsRetried) {
  World world;
  world.SetFailing(true);
  world.SetLive("p1", "instance", "ins_1", {{"status", "running"}});
  EventHub::Options o = SlowOptions();
  o.recheck_interval = milliseconds(50);
  EventHub hub(world.Reader(), o);
  auto s = OpenStream(hub, "p1");
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(s->data(), "");
  EXPECT_FALSE(s->ended());
  world.SetFailing(false);
  EXPECT_NE(s->WaitFor("snapshot"), std::string::npos);
}

TEST(EventHubTest, LimitsPerPersonAndInAll) {
  World world;
  EventHub::Options o = SlowOptions();
  o.max_streams_per_person = 3;
  o.max_streams = 5;
  EventHub hub(world.Reader(), o);
  std::vector<std::shared_ptr<FakeStream>> alice;
  for (int i = 0; i < 3; ++i) alice.push_back(OpenStream(hub, "alice"));
  auto refused = hub.Open("alice", true);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, core::ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused.error().api_code, "rate_limited");
  EXPECT_EQ(refused.error().details["retry_after_seconds"], 3);
  // Others are not affected; the total is.
  auto b1 = OpenStream(hub, "bob");
  auto b2 = OpenStream(hub, "bob");
  auto full = hub.Open("carol", true);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().api_code, "too_many_streams");
  EXPECT_EQ(hub.open_streams(), 5u);
  // A stream that ends frees its place at once.
  alice[0]->End();
  EXPECT_EQ(hub.open_streams(), 4u);
  auto again = hub.Open("alice", true);
  ASSERT_TRUE(again);
  // A reservation whose producer is dropped uncalled (HEAD, an error answer) frees it too.
  *again = nullptr;
  EXPECT_EQ(hub.open_streams(), 4u);
  { auto dropped = hub.Open("alice", true); }
  EXPECT_EQ(hub.open_streams(), 4u);
  // A stream that has already ended when handed over (HEAD) is released at once.
  auto head = hub.Open("alice", true);
  ASSERT_TRUE(head);
  auto ended = std::make_shared<FakeStream>();
  ended->End();
  (*head)(ended);
  EXPECT_EQ(hub.open_streams(), 4u);
}

TEST(EventHubTest, UnprovenAccountsGetFewStreamsAndACornerOfTheTotal) {
  World world;
  EventHub::Options o = SlowOptions();
  o.max_streams_per_person = 3;
  o.max_streams_per_unproven_person = 1;
  o.max_unproven_streams = 2;
  o.max_streams = 6;
  EventHub hub(world.Reader(), o);
  std::vector<EventHub::Producer> held;
  auto open = [&](const std::string& who, bool proven) {
    auto p = hub.Open(who, proven);
    if (p) held.push_back(std::move(*p));
    return p;
  };
  ASSERT_TRUE(open("u1", false));
  auto second = open("u1", false);  // one each
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().api_code, "rate_limited");
  ASSERT_TRUE(open("u2", false));
  // Fresh unproven accounts (free to make) find their corner full…
  auto third = open("u3", false);
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(third.error().api_code, "too_many_streams");
  EXPECT_EQ(third.error().details["retry_after_seconds"], 3);
  // …while proven people still get theirs, up to the total.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(open("alice", true)) << i;
  ASSERT_TRUE(open("bob", true));
  EXPECT_EQ(hub.open_streams(), 6u);
  auto full = open("carol", true);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().api_code, "too_many_streams");
  // An unproven stream that goes frees a place in the corner.
  held.erase(held.begin());  // u1's reservation, dropped uncalled
  EXPECT_EQ(hub.open_streams(), 5u);
  EXPECT_TRUE(open("u3", false));
}

TEST(EventHubTest, ShutdownEndsStreamsAndRefusesNewOnes) {
  World world;
  EventHub hub(world.Reader(), SlowOptions());
  auto s = OpenStream(hub, "p1");
  auto reserved = hub.Open("p1", true);
  ASSERT_TRUE(reserved);
  hub.Shutdown();
  EXPECT_TRUE(s->ended());
  EXPECT_EQ(hub.Open("p1", true).error().api_code, "shutting_down");
  auto late = std::make_shared<FakeStream>();
  (*reserved)(late);  // handed over after the shutdown: ended at once
  EXPECT_TRUE(late->ended());
  hub.Shutdown();  // idempotent
}

TEST(EventHubTest, AStreamWhoseSignInEndedIsEnded) {
  World world;
  world.SetLive("p1", "instance", "ins_1", {{"status", "running"}});
  EventHub::Options o = SlowOptions();  // passes only on Wake()
  o.reauth_interval = milliseconds(100);
  EventHub hub(world.Reader(), o);
  std::atomic<bool> allowed{true};
  std::atomic<int> asked{0};
  auto producer = hub.Open("p1", true, [&] {
    ++asked;
    return allowed.load();
  });
  ASSERT_TRUE(producer);
  auto s = std::make_shared<FakeStream>();
  (*producer)(s);
  ASSERT_NE(s->WaitFor("snapshot"), std::string::npos);
  std::this_thread::sleep_for(milliseconds(150));
  world.SetLive("p1", "instance", "ins_1", {{"status", "restarting"}});
  hub.Wake();
  ASSERT_NE(s->WaitFor("restarting"), std::string::npos);
  EXPECT_GE(asked, 1);
  EXPECT_FALSE(s->ended());

  allowed = false;
  std::this_thread::sleep_for(milliseconds(150));
  world.SetLive("p1", "instance", "ins_1", {{"status", "exited"}});
  hub.Wake();
  for (int i = 0; i < 200 && !s->ended(); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(s->ended());
  EXPECT_EQ(s->data().find("exited"), std::string::npos);  // not one more event
  EXPECT_EQ(hub.open_streams(), 0u);
}

// Break test of issue 11: a squatter's stream, opened before the mailbox owner claimed the
// address, went on carrying the owner's events until the next reauth (up to 10 s). Credentials
// are asked again before any write that carries events, however long the reauth interval.
TEST(EventHubTest, NoEventGoesOutOnCredentialsThatEndedBeforeTheReauthIsDue) {
  World world;
  world.SetLive("p1", "instance", "ins_1", {{"status", "running"}});
  EventHub::Options o = SlowOptions();  // passes only on Wake()
  o.reauth_interval = std::chrono::hours(1);
  EventHub hub(world.Reader(), o);
  std::atomic<bool> allowed{true};
  auto producer = hub.Open("p1", true, [&] { return allowed.load(); });
  ASSERT_TRUE(producer);
  auto s = std::make_shared<FakeStream>();
  (*producer)(s);
  ASSERT_NE(s->WaitFor("snapshot"), std::string::npos);

  allowed = false;  // e.g. the owner proved the address: the squatter's sign-in is gone
  world.SetLive("p1", "queue_entry", "qen_owner", {{"name", "owners-secret-name"}});
  hub.Wake();
  for (int i = 0; i < 200 && !s->ended(); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(s->ended());
  EXPECT_EQ(s->data().find("owners-secret-name"), std::string::npos) << s->data();
  EXPECT_EQ(hub.open_streams(), 0u);
}

}  // namespace
}  // namespace gpuwerk::api
