// GET /api/v1/events (issue 5, Deliver 6) over a real HTTP connection to an in-process server
// with fake agents: the snapshot, an instance's life in order, queue positions, another
// person's changes never shown, 401, the per-person limit, a stopping server, and the
// `gpuwerk events` CLI verb. The bytes asserted are the ones on the wire (chunked decoding and
// SSE parsing done here, not by the server's code).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// A client of GET /api/v1/events on a plain TCP connection: sends the request, reads the
/// status line and headers, then decodes the chunked body (RFC 9112 §7.1) and parses the
/// server-sent events in it (WHATWG HTML §9.2.6, for the LF line ends the server sends).
class EventStream {
 public:
  struct Event {
    std::string id;
    std::string type;
    std::string data;
    json Json() const { return json::parse(data, nullptr, false); }
  };

  EventStream(uint16_t port, const std::vector<std::string>& headers) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
    std::string request = "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    request += "Accept: text/event-stream\r\n";
    for (const auto& h : headers) request += h + "\r\n";
    request += "\r\n";
    if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      return;
    }
    ReadHead();
  }
  ~EventStream() { Close(); }
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  int status = 0;
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string error_body;                      ///< a non-200 answer's body
  std::string retry;                           ///< the last `retry:` field
  int comments = 0;                            ///< comment lines (heartbeats)
  std::string text;                            ///< every body byte so far

  json ErrorJson() const { return json::parse(error_body, nullptr, false); }

  /// The next event, waiting up to `timeout`; nullopt when none came (or the stream ended).
  std::optional<Event> Next(milliseconds timeout = milliseconds(8000)) {
    const auto deadline = Steady::now() + timeout;
    while (true) {
      if (auto e = TakeEvent()) return e;
      if (ended_ || !Pump(deadline)) return std::nullopt;
    }
  }

  /// Waits for the next event, expecting it to be `type`.
  Event Expect(const std::string& type, milliseconds timeout = milliseconds(8000)) {
    auto e = Next(timeout);
    EXPECT_TRUE(e) << "no '" << type << "' event; so far: " << text;
    if (!e) return {};
    EXPECT_EQ(e->type, type) << e->data;
    return *e;
  }

  /// True when the last chunk arrives and the server closes the connection within `timeout`.
  bool WaitEnd(milliseconds timeout) {
    const auto deadline = Steady::now() + timeout;
    while (!ended_) {
      if (!Pump(deadline)) return false;
    }
    char byte;
    pollfd p{fd_, POLLIN, 0};
    const int left = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<milliseconds>(deadline - Steady::now()).count()));
    return ::poll(&p, 1, left) == 1 && ::recv(fd_, &byte, 1, 0) == 0;
  }

 private:
  bool Fill(Steady::time_point deadline) {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    const int left = static_cast<int>(
        std::chrono::duration_cast<milliseconds>(deadline - Steady::now()).count());
    if (left <= 0 || ::poll(&p, 1, left) <= 0) return false;
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    raw_.append(buf, static_cast<size_t>(n));
    return true;
  }

  void ReadHead() {
    const auto deadline = Steady::now() + std::chrono::seconds(8);
    size_t end;
    while ((end = raw_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill(deadline)) return;
    }
    std::istringstream lines(raw_.substr(0, end));
    raw_.erase(0, end + 4);
    std::string line;
    std::getline(lines, line);
    status = std::stoi(line.substr(9, 3));
    while (std::getline(lines, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      headers[Lower(line.substr(0, colon))] = value;
    }
    if (status != 200 && headers.count("content-length")) {
      const size_t length = std::stoul(headers["content-length"]);
      while (raw_.size() < length) {
        if (!Fill(deadline)) break;
      }
      error_body = raw_.substr(0, length);
    }
  }

  /// Decodes the chunks that are complete, reading more first when none is. False on timeout
  /// or close.
  bool Pump(Steady::time_point deadline) {
    if (status != 200) return false;
    if (!Decode() && !Fill(deadline)) return false;
    Decode();
    return true;
  }

  /// Decodes the complete chunks in `raw_`; false when there was none.
  bool Decode() {
    bool any = false;
    while (true) {
      const size_t line_end = raw_.find("\r\n");
      if (line_end == std::string::npos) break;
      const size_t size = std::stoul(raw_.substr(0, line_end), nullptr, 16);
      if (raw_.size() < line_end + 2 + size + 2) break;
      EXPECT_EQ(raw_.substr(line_end + 2 + size, 2), "\r\n");
      const std::string data = raw_.substr(line_end + 2, size);
      raw_.erase(0, line_end + 2 + size + 2);
      any = true;
      if (size == 0) {
        ended_ = true;
        break;
      }
      body_ += data;
      text += data;
    }
    return any;
  }

  std::optional<Event> TakeEvent() {
    while (true) {
      const size_t end = body_.find("\n\n");
      if (end == std::string::npos) return std::nullopt;
      std::istringstream block(body_.substr(0, end));
      body_.erase(0, end + 2);
      Event e;
      bool has_data = false;
      std::string line;
      while (std::getline(block, line)) {
        if (line.starts_with(":")) {
          ++comments;
        } else if (line.starts_with("id: ")) {
          e.id = line.substr(4);
        } else if (line.starts_with("event: ")) {
          e.type = line.substr(7);
        } else if (line.starts_with("data: ")) {
          e.data += (has_data ? "\n" : "") + line.substr(6);
          has_data = true;
        } else if (line.starts_with("retry: ")) {
          retry = line.substr(7);
        } else {
          ADD_FAILURE() << "unexpected line in the event stream: " << line;
        }
      }
      if (has_data) return e;
    }
  }

  int fd_ = -1;
  std::string raw_;   // undecoded bytes
  std::string body_;  // decoded body bytes not yet parsed into events
  bool ended_ = false;
};

class EventsApiTest : public QueueFixture {
 protected:
  static json Container(const std::string& id, const std::string& state, bool ready) {
    return {{"instance_id", id}, {"node_index", 0},    {"container_id", "c-" + id},
            {"state", state},    {"exit_code", 0},     {"started_at", ""},
            {"ssh_port", 40001}, {"ssh_ready", ready}, {"restart_generation", 0},
            {"error", ""}};
  }
  /// A stream signed in with `p`'s browser cookie.
  std::unique_ptr<EventStream> StreamOf(Person& p) {
    return std::make_unique<EventStream>(
        app_->port(), std::vector<std::string>{"Cookie: gpuwerk_session=" +
                                               p.browser->CookieValue("gpuwerk_session")});
  }
  std::string TokenOf(Person& p) {
    auto r = p.browser->PostJson("/api/v1/tokens", {{"name", "events"}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("token", "");
  }
};

TEST_F(EventsApiTest, WithoutSignInIs401) {
  EventStream anonymous(app_->port(), {});
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(anonymous.headers["content-type"], "application/problem+json");
  EXPECT_EQ(anonymous.ErrorJson()["code"], "unauthenticated") << anonymous.error_body;
  EventStream bad_token(app_->port(), {"Authorization: Bearer gwt_not_a_token"});
  EXPECT_EQ(bad_token.status, 401);
  EXPECT_EQ(bad_token.ErrorJson()["code"], "unauthenticated");
  EventStream bad_cookie(app_->port(), {"Cookie: gpuwerk_session=forged"});
  EXPECT_EQ(bad_cookie.status, 401);
}

TEST_F(EventsApiTest, AnInstancesLifeArrivesInOrder) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  auto events = StreamOf(alice);
  ASSERT_EQ(events->status, 200) << events->error_body;
  EXPECT_EQ(events->headers["content-type"], "text/event-stream");
  EXPECT_EQ(events->headers["cache-control"], "no-store");
  EXPECT_EQ(events->headers["transfer-encoding"], "chunked");
  EXPECT_EQ(events->headers.count("content-length"), 0u);

  auto snapshot = events->Expect("snapshot");
  EXPECT_EQ(snapshot.id, "1");
  EXPECT_EQ(events->retry, "3000");
  EXPECT_EQ(snapshot.Json(),
            json({{"instances", json::array()}, {"queue_entries", json::array()}}));
  EXPECT_TRUE(events->text.starts_with("retry: 3000\n\nid: 1\nevent: snapshot\ndata: {"))
      << events->text;

  auto created = Create(alice, "alpha");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  auto provisioning = events->Expect("instance");
  EXPECT_EQ(provisioning.id, "2");
  EXPECT_EQ(provisioning.Json()["status"], "provisioning");
  // The same shape as the REST API's.
  EXPECT_EQ(provisioning.Json(), alice.browser->Get("/api/v1/instances/" + id).Json());

  ASSERT_EQ(Sync("spark-a", json::array({Container(id, "running", true)})).status, 200);
  auto running = events->Expect("instance");
  EXPECT_EQ(running.id, "3");
  EXPECT_EQ(running.Json()["status"], "running");
  EXPECT_EQ(running.Json(), alice.browser->Get("/api/v1/instances/" + id).Json());

  ASSERT_EQ(alice.browser->Delete("/api/v1/instances/" + id).status, 204);
  auto deleting = events->Expect("instance");
  EXPECT_EQ(deleting.id, "4");
  EXPECT_EQ(deleting.Json()["status"], "deleting");

  ASSERT_EQ(Sync("spark-a").status, 200);  // the container is gone: the delete is final
  auto deleted = events->Expect("instance");
  EXPECT_EQ(deleted.id, "5");
  EXPECT_EQ(deleted.Json()["id"], id);
  EXPECT_EQ(deleted.Json()["status"], "deleted");
  EXPECT_TRUE(deleted.Json()["deleted_at"].is_string()) << deleted.data;
  // Its last event: nothing more about it (a periodic re-check included).
  EXPECT_FALSE(events->Next(milliseconds(2500))) << events->text;
}

/// A drift entry as an agent sends it (docs/agent-protocol.md "Drift").
json Drift(const std::string& id, const std::string& kind, const std::string& container_id) {
  return {{"instance_id", id},
          {"node_index", 0},
          {"kind", kind},
          {"container_id", container_id},
          {"exit_code", 0},
          {"oom_killed", false},
          {"at", ""},
          {"recreated", false},
          {"new_container_id", ""},
          {"changes", json::array()}};
}

// A change made to a container outside gpuwerk (docs/instances.md "Changes outside gpuwerk"):
// the instance's status reason and `drift` say so, the event stream carries it, it is audited,
// and the owner gets one mail however often it happens within the hour.
TEST_F(EventsApiTest, DriftShowsInTheStatusTheStreamTheAuditLogAndOneMail) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  auto created = Create(alice, "alpha");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  ASSERT_EQ(Sync("spark-a", json::array({Container(id, "running", true)})).status, 200);
  auto events = StreamOf(alice);
  ASSERT_EQ(events->status, 200) << events->error_body;
  auto snapshot = events->Expect("snapshot").Json();
  ASSERT_EQ(snapshot["instances"].size(), 1u);
  EXPECT_EQ(snapshot["instances"][0]["status"], "running");
  EXPECT_EQ(snapshot["instances"][0]["status_reason"], "");
  EXPECT_FALSE(snapshot["instances"][0].contains("drift"));

  // `docker rm -f` on the host; the agent made it again in the same round.
  json removed = Drift(id, "removed", "c-" + id);
  removed["recreated"] = true;
  removed["new_container_id"] = "c-new";
  ASSERT_EQ(Sync("spark-a", json::array({Container(id, "running", true)}), json::array(),
                 json::array({removed}))
                .status,
            200);
  auto event = events->Expect("instance");
  const json shown = event.Json();
  EXPECT_EQ(shown["status"], "running");
  const std::string reason = shown["status_reason"];
  EXPECT_NE(reason.find("removed outside gpuwerk"), std::string::npos) << reason;
  EXPECT_NE(reason.find("files written since launch are gone"), std::string::npos) << reason;
  EXPECT_NE(reason.find("SSH host key is new"), std::string::npos) << reason;
  EXPECT_EQ(shown["drift"]["kind"], "removed");
  EXPECT_EQ(shown["drift"]["reason"], reason);
  EXPECT_EQ(shown["drift"]["count"], 1);
  EXPECT_EQ(shown, alice.browser->Get("/api/v1/instances/" + id).Json());

  auto audited = [&](const std::string& kind) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row,
                               tx.QueryOne("SELECT COUNT(*) FROM audit_events WHERE action = "
                                           "'instance.drift' AND target = ? AND detail LIKE ?",
                                           {id, "%\"kind\":\"" + kind + "\"%"}));
      return row->Int(0);
    });
    return n ? *n : -1;
  };
  EXPECT_EQ(audited("removed"), 1);

  // `docker stop` again and again (the agent starts it each time): audited each time, mailed
  // once.
  json stopped = Drift(id, "stopped", "c-new");
  stopped["exit_code"] = 137;
  stopped["at"] = "2026-12-02T01:05:00.123456789Z";
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Sync("spark-a", json::array({Container(id, "exited", false)}), json::array(),
                   json::array({stopped}))
                  .status,
              200);
  }
  EXPECT_EQ(audited("stopped"), 3);
  const json after = alice.browser->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(after["status"], "exited");
  EXPECT_NE(after["status_reason"].get<std::string>().find(
                "stopped without gpuwerk stopping it (exit code 137, at 2026-12-02 01:05:00 UTC"),
            std::string::npos)
      << after["status_reason"];
  EXPECT_EQ(after["drift"]["count"], 4);
  // The drift mails to alice, delivering what is due until there are `at_least` (up to 10 s).
  auto drift_mails = [&](size_t at_least) {
    std::vector<ReceivedMail> out;
    for (int i = 0; i < 200 && out.size() < at_least; ++i) {
      if (i > 0) std::this_thread::sleep_for(milliseconds(50));
      out.clear();
      for (const auto& m : Mails(alice.email, 0)) {
        if (m.subject.find("changed outside gpuwerk") != std::string::npos) out.push_back(m);
      }
    }
    return out;
  };
  auto mails = drift_mails(1);
  ASSERT_EQ(mails.size(), 1u);
  EXPECT_NE(mails[0].subject.find("alpha"), std::string::npos) << mails[0].subject;
  EXPECT_NE(mails[0].text_body.find("files written since launch are gone"), std::string::npos)
      << mails[0].text_body;

  // An hour on, the next change is mailed again.
  clock_.Advance(std::chrono::hours(1));
  ASSERT_EQ(Sync("spark-a", json::array({Container(id, "running", true)}), json::array(),
                 json::array({Drift(id, "paused", "c-new")}))
                .status,
            200);
  mails = drift_mails(2);
  ASSERT_EQ(mails.size(), 2u);
  EXPECT_TRUE(std::any_of(mails.begin(), mails.end(), [](const ReceivedMail& m) {
    return m.text_body.find("paused outside gpuwerk") != std::string::npos;
  }));

  // A restart through gpuwerk clears the reason; `drift` stays as the instance's history.
  ASSERT_EQ(alice.browser->PostJson("/api/v1/instances/" + id + "/restart", json::object()).status,
            202);
  json r1 = Container(id, "running", true);
  r1["restart_generation"] = 1;
  ASSERT_EQ(Sync("spark-a", json::array({r1})).status, 200);
  const json restarted = alice.browser->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(restarted["status"], "running");
  EXPECT_EQ(restarted["status_reason"], "");
  EXPECT_EQ(restarted["drift"]["kind"], "paused");
}

// Malformed drift is refused whole with a stable code, and changes nothing.
TEST_F(EventsApiTest, MalformedDriftIsRefusedAndChangesNothing) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  auto created = Create(alice, "alpha");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.Json()["id"];
  ASSERT_EQ(Sync("spark-a", json::array({Container(id, "running", true)})).status, 200);
  json bad_kind = Drift(id, "deleted", "c1");
  ExpectProblem(Sync("spark-a", json::array({Container(id, "exited", false)}), json::array(),
                     json::array({bad_kind})),
                400, "invalid_field");
  json missing = Drift(id, "stopped", "c1");
  missing.erase("exit_code");
  ExpectProblem(Sync("spark-a", json::array(), json::array(), json::array({missing})), 400,
                "invalid_field");
  json extra = Drift(id, "stopped", "c1");
  extra["signal"] = "SIGTERM";
  ExpectProblem(Sync("spark-a", json::array(), json::array(), json::array({extra})), 400,
                "invalid_field");
  json change = Drift(id, "changed", "c1");
  change["changes"] = json::array({"labels"});
  ExpectProblem(Sync("spark-a", json::array(), json::array(), json::array({change})), 400,
                "invalid_field");
  ExpectProblem(Sync("spark-a", json::array(), json::array(), json::object()), 400,
                "invalid_field");
  const json shown = alice.browser->Get("/api/v1/instances/" + id).Json();
  EXPECT_EQ(shown["status"], "running");
  EXPECT_FALSE(shown.contains("drift"));
  // Drift of another host's instance is ignored.
  AddHost("spark-b");
  ASSERT_EQ(Sync("spark-b", json::array(), json::array(), json::array({Drift(id, "removed", "c1")}))
                .status,
            200);
  EXPECT_FALSE(alice.browser->Get("/api/v1/instances/" + id).Json().contains("drift"));
}

TEST_F(EventsApiTest, SnapshotHasTheShapesOfTheListsAndTokensWork) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  ASSERT_EQ(Create(alice, "alpha").status, 201);
  auto joined = Join(alice, "beta");  // the only host is taken: queued
  ASSERT_EQ(joined.status, 201) << joined.body;
  ASSERT_EQ(joined.Json()["status"], "open");

  EventStream events(app_->port(), {"Authorization: Bearer " + TokenOf(alice)});
  ASSERT_EQ(events.status, 200) << events.error_body;
  auto snapshot = events.Expect("snapshot").Json();
  EXPECT_EQ(snapshot["instances"], alice.browser->Get("/api/v1/instances").Json()["items"]);
  EXPECT_EQ(snapshot["queue_entries"], alice.browser->Get("/api/v1/queue-entries").Json()["items"]);
  ASSERT_EQ(snapshot["queue_entries"].size(), 1u);
  EXPECT_EQ(snapshot["queue_entries"][0]["position"], 1);
}

TEST_F(EventsApiTest, QueuePositionsMoveAndOthersAreNeverSeen) {
  AddHost("spark-a");
  Person holder = NewPerson("holder@example.test");
  auto held = Create(holder, "holding");
  ASSERT_EQ(held.status, 201) << held.body;
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  auto a = StreamOf(alice);
  auto b = StreamOf(bob);
  ASSERT_EQ(a->status, 200);
  ASSERT_EQ(b->status, 200);
  a->Expect("snapshot");
  b->Expect("snapshot");

  ASSERT_EQ(Join(alice, "job-a").status, 201);
  auto a_open = a->Expect("queue_entry").Json();
  EXPECT_EQ(a_open["status"], "open");
  EXPECT_EQ(a_open["position"], 1);
  EXPECT_EQ(a_open["name"], "job-a");

  auto bob_joined = Join(bob, "job-b");
  ASSERT_EQ(bob_joined.status, 201);
  const std::string bob_entry = bob_joined.Json()["id"];
  auto b_open = b->Expect("queue_entry").Json();
  EXPECT_EQ(b_open["position"], 2);
  EXPECT_EQ(b_open, bob.browser->Get("/api/v1/queue-entries").Json()["items"][0]);

  // Alice leaves: hers says cancelled; Bob moves up.
  ASSERT_EQ(
      alice.browser->Delete("/api/v1/queue-entries/" + a_open["id"].get<std::string>()).status,
      204);
  auto a_left = a->Expect("queue_entry").Json();
  EXPECT_EQ(a_left["id"], a_open["id"]);
  EXPECT_EQ(a_left["status"], "cancelled");
  EXPECT_TRUE(a_left["left_at"].is_string());
  EXPECT_TRUE(a_left["position"].is_null());
  auto b_moved = b->Expect("queue_entry").Json();
  EXPECT_EQ(b_moved["id"], bob_entry);
  EXPECT_EQ(b_moved["position"], 1);

  // The host frees: Bob's entry is launched; he sees his new instance, then the entry launched.
  const std::string holding = held.Json()["id"];
  ASSERT_EQ(holder.browser->Delete("/api/v1/instances/" + holding).status, 204);
  ASSERT_EQ(Sync("spark-a").status, 200);
  auto b_instance = b->Expect("instance").Json();
  EXPECT_EQ(b_instance["name"], "job-b");
  EXPECT_EQ(b_instance["status"], "provisioning");
  auto b_launched = b->Expect("queue_entry").Json();
  EXPECT_EQ(b_launched["id"], bob_entry);
  EXPECT_EQ(b_launched["status"], "launched");
  EXPECT_EQ(b_launched["instance_id"], b_instance["id"]);

  // Alice saw nothing of Bob's (nor of the holder's instance), ever.
  EXPECT_FALSE(a->Next(milliseconds(2500))) << a->text;
  for (const std::string& other : {std::string("job-b"), bob_entry, holding,
                                   b_instance["id"].get<std::string>(), std::string("holding")}) {
    EXPECT_EQ(a->text.find(other), std::string::npos) << other << " in " << a->text;
  }
  EXPECT_EQ(b->text.find("job-a"), std::string::npos) << b->text;
}

TEST_F(EventsApiTest, OnePersonMayHoldEightStreams) {
  Person alice = NewPerson("alice@example.test");
  std::vector<std::unique_ptr<EventStream>> open;
  for (int i = 0; i < 8; ++i) {
    open.push_back(StreamOf(alice));
    ASSERT_EQ(open.back()->status, 200) << i << ": " << open.back()->error_body;
    open.back()->Expect("snapshot");
  }
  auto ninth = StreamOf(alice);
  EXPECT_EQ(ninth->status, 429);
  EXPECT_EQ(ninth->headers["content-type"], "application/problem+json");
  EXPECT_EQ(ninth->ErrorJson()["code"], "rate_limited") << ninth->error_body;
  EXPECT_EQ(ninth->headers["retry-after"], "3");
  // Someone else is not limited by Alice's streams.
  Person bob = NewPerson("bob@example.test");
  auto bobs = StreamOf(bob);
  EXPECT_EQ(bobs->status, 200);
  // Closing one frees its place as soon as the server sees the connection go.
  open.front()->Close();
  int status = 0;
  for (int attempt = 0; attempt < 50 && status != 200; ++attempt) {
    std::this_thread::sleep_for(milliseconds(100));
    status = StreamOf(alice)->status;
  }
  EXPECT_EQ(status, 200);
}

TEST_F(EventsApiTest, AStoppingServerEndsTheStreams) {
  Person alice = NewPerson("alice@example.test");
  auto events = StreamOf(alice);
  ASSERT_EQ(events->status, 200);
  events->Expect("snapshot");
  const auto start = Steady::now();
  app_->Stop();
  EXPECT_LT(Steady::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(events->WaitEnd(milliseconds(2000)));  // the last chunk, then the close
}

/// `gpuwerk events …` run in this process; returns its exit code, stdout and stderr.
struct CliRun {
  int exit_code = -1;
  std::string out, err;
};
CliRun RunEventsVerb(std::vector<std::string> args) {
  CliRun run;
  std::istringstream in;
  std::ostringstream out, err;
  CLI::App app("gpuwerk");
  cli::ClientIo io{.env = [](std::string_view) { return std::optional<std::string>(); },
                   .in = &in,
                   .out = &out,
                   .err = &err,
                   .in_is_terminal = false};
  cli::AddClientCommands(app, run.exit_code, io);
  args.insert(args.begin(), "gpuwerk");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    run.exit_code = app.exit(e, out, err);
  }
  run.out = out.str();
  run.err = err.str();
  return run;
}

TEST_F(EventsApiTest, CliPrintsOneLinePerEvent) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  const std::string token = TokenOf(alice);
  const std::string url = app_->base_url();
  // Two events: the snapshot, then the create (or, if the create was first, its status change).
  auto run = std::async(std::launch::async, [&] {
    return RunEventsVerb({"events", "--json", "--count", "2", "--url", url, "--token", token});
  });
  for (int i = 0; i < 100; ++i) {  // the stream is open
    if (op_->Get("/metrics").body.find("gpuwerk_event_streams 1") != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  auto created = Create(alice, "alpha");
  ASSERT_EQ(created.status, 201);
  const std::string id = created.Json()["id"];
  ASSERT_EQ(Sync("spark-a", json::array({Container(id, "running", true)})).status, 200);
  ASSERT_EQ(run.wait_for(std::chrono::seconds(15)), std::future_status::ready);
  CliRun result = run.get();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  std::istringstream lines(result.out);
  std::string first, second, extra;
  ASSERT_TRUE(std::getline(lines, first)) << result.out;
  ASSERT_TRUE(std::getline(lines, second)) << result.out;
  EXPECT_FALSE(std::getline(lines, extra)) << result.out;
  json snapshot = json::parse(first);
  EXPECT_EQ(snapshot["event"], "snapshot");
  EXPECT_EQ(snapshot["id"], "1");
  EXPECT_TRUE(snapshot["data"]["instances"].is_array());
  json change = json::parse(second);
  EXPECT_EQ(change["event"], "instance");
  EXPECT_EQ(change["id"], "2");
  EXPECT_EQ(change["data"]["id"], id);

  // For people: one readable line.
  CliRun human = RunEventsVerb({"events", "--count", "1", "--url", url, "--token", token});
  EXPECT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("now: 1 instance: alpha running; 0 queue entries"), std::string::npos)
      << human.out;
  EXPECT_EQ(std::count(human.out.begin(), human.out.end(), '\n'), 1) << human.out;

  // A refused token: one line, exit 1, no retrying.
  CliRun refused = RunEventsVerb({"events", "--count", "1", "--url", url, "--token", "gwt_wrong"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("unauthenticated"), std::string::npos) << refused.err;
}

TEST_F(EventsApiTest, SigningOutEndsTheStream) {
  Person alice = NewPerson("alice@example.test");
  const std::string cookie =
      "Cookie: gpuwerk_session=" + alice.browser->CookieValue("gpuwerk_session");
  EventStream events(app_->port(), {cookie});
  ASSERT_EQ(events.status, 200);
  events.Expect("snapshot");
  ASSERT_EQ(alice.browser->PostJson("/api/v1/auth/logout", json::object()).status, 204);
  // Checked again every 10 s.
  EXPECT_TRUE(events.WaitEnd(milliseconds(15000)));
  EXPECT_EQ(EventStream(app_->port(), {cookie}).status, 401);
}

}  // namespace
}  // namespace gpuwerk::testing
