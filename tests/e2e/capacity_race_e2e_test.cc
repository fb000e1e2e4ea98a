// Issue 5, C15 against real processes: 50 people, each with an ssh-keygen key, fire
// POST /api/v1/instances at once (threads released by one latch) at the real `gpuwerk server`
// with three free spark-1x hosts, each run by its own real `gpuwerk agent` (own --state-dir,
// --ssh-bind 127.0.0.1) on the test's own podman API service (scripts/engine.sh) with the real
// instance image. Exactly 3 answers are 201 and 47 are 409 `no_capacity`; no host is given twice,
// as the store says (GET /api/v1/admin/hosts as the operator) and as the ENGINE says (containers
// carrying the test hosts' `gpuwerk.host` labels, read with the test's own EngineProbe): exactly 3
// containers, one per host, each running one of the 3 instances. Then the instances are deleted
// and their containers must go. tests/integration/capacity_race_test.cc checks the store alone
// with a fake agent. Sign-ups are limited to 30 an hour per source address
// (docs/accounts.md), so the people sign up from 127.0.0.2 and 127.0.0.3 (25 each; the whole of
// 127/8 is local on Linux) and then sign in as usual. Needs root (rootful podman).
#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <latch>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/engine_probe.h"
#include "tests/support/eventually.h"
#include "tests/support/host_waits.h"
#include "tests/support/http_client.h"
#include "tests/support/matchers.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/sign_up.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-crace-engine");

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kPeople = 50;
constexpr int kHosts = 3;
/// Sign-ups per source address, below the server's 30 an hour.
constexpr int kSignUpsPerAddress = 25;

size_t AppendBody(char* ptr, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(ptr, size * n);
  return size * n;
}

/// POST /api/v1/auth/signup from the local source address `source` (e.g. "127.0.0.2"), so that
/// the server's per-address sign-up limit counts it there. The HTTP status (-1 when the request
/// did not get an answer; `*body` then holds curl's message) and the body.
long SignUpFrom(const std::string& url, const std::string& source, const std::string& email,
                std::string* body) {
  CURL* c = curl_easy_init();
  if (c == nullptr) return -1;
  const std::string target = url + "/api/v1/auth/signup";
  const std::string payload = json{{"email", email}, {"password", kPassword}}.dump();
  const std::string interface = "host!" + source;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_URL, target.c_str());
  curl_easy_setopt(c, CURLOPT_INTERFACE, interface.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
  long status = -1;
  const CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  } else {
    *body = curl_easy_strerror(rc);
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  return status;
}

/// One racer: signed in, with one SSH key on file.
struct Racer {
  std::string email;
  std::unique_ptr<HttpClient> browser;
  std::string key_id;
};

class CapacityRaceE2eTest : public E2eTest<::testing::Test, 30> {
 protected:
  /// Racer `i`: signs up from 127.0.0.(2 + i / 25), proves the address, signs in, puts an
  /// ssh-keygen key on file.
  Racer NewRacer(int i) {
    Racer r;
    r.email = "racer" + std::to_string(i) + "@example.test";
    const std::string source = "127.0.0." + std::to_string(2 + i / kSignUpsPerAddress);
    std::string body;
    const long status = SignUpFrom(platform_.url(), source, r.email, &body);
    EXPECT_EQ(status, 202) << r.email << " from " << source << ": " << body;
    // The address is proven with the mailed link (docs/accounts.md "Address proof").
    std::vector<std::string> links;
    EXPECT_TRUE(Eventually(
        [&] {
          links = AddressProofTokens(platform_.data() / "mail", r.email);
          return !links.empty();
        },
        seconds(30)))
        << "no address-proof link for " << r.email;
    if (!links.empty()) {
      auto proven = HttpClient(platform_.url())
                        .PostJson("/api/v1/auth/prove-address/consume",
                                  {{"token", links.back()}, {"password", kPassword}});
      EXPECT_EQ(proven.status, 200) << proven.body;
    }
    r.browser = platform_.SignIn(r.email, kPassword);
    platform_.RecordCardFor(r.email);  // so that they can launch
    GeneratedKey key = GenerateKey(dir_.path(), "racer" + std::to_string(i));
    EXPECT_FALSE(key.public_line.empty()) << "ssh-keygen failed";
    auto k = r.browser->PostJson("/api/v1/ssh-keys",
                                 {{"name", "laptop"}, {"public_key", key.public_line}});
    EXPECT_EQ(k.status, 201) << k.body;
    r.key_id = k.Json().value("id", "");
    return r;
  }

  /// The store's view, as the operator reads it: every host's name → its instance_id ("" when
  /// free).
  std::map<std::string, std::string> StoreHolders() {
    std::map<std::string, std::string> out;
    auto hosts = op_->Get("/api/v1/admin/hosts").Json();
    if (!hosts.is_object() || !hosts["items"].is_array()) return out;
    for (const auto& item : hosts["items"]) {
      const std::string name = item.value("name", "");
      const json& at = item["instance_id"];
      out[name] = at.is_string() ? at.get<std::string>() : "";
    }
    return out;
  }

  /// The engine's view: host id → the containers carrying that `gpuwerk.host` label (any state).
  /// Null entries when the engine did not answer.
  std::map<std::string, json> EngineByHost() {
    std::map<std::string, json> out;
    for (size_t i = 0; i < platform_.host_count(); ++i) {
      const std::string& id = platform_.host(i).id;
      out[id] = engine_->ContainersWithLabel(kHostLabel, id);
    }
    return out;
  }

  /// Whether the engine shows exactly one running container per host, each of one of `instances`
  /// and no instance twice.
  bool EngineSettled(const std::set<std::string>& instances) {
    std::set<std::string> seen;
    for (const auto& [host, list] : EngineByHost()) {
      if (!list.is_array() || list.size() != 1) return false;
      if (list[0].value("State", "") != "running") return false;
      const json& labels = list[0]["Labels"];
      if (!labels.is_object() || !labels.contains(kInstanceLabel)) return false;
      seen.insert(labels[kInstanceLabel].get<std::string>());
    }
    return seen == instances;
  }

  /// Store and engine agree (R-12, C15): each host holds exactly one distinct instance of
  /// `instances` in the store; on the engine exactly 3 containers carry the hosts' labels, one per
  /// host, running, each the instance the store placed there; no host label has two.
  void ExpectOneInstancePerHost(const std::set<std::string>& instances, const std::string& when) {
    SCOPED_TRACE(when);
    const auto holders = StoreHolders();
    ASSERT_EQ(holders.size(), static_cast<size_t>(kHosts)) << "admin/hosts lists other hosts";
    std::set<std::string> held;
    for (size_t i = 0; i < platform_.host_count(); ++i) {
      const E2eHost& h = platform_.host(i);
      ASSERT_TRUE(holders.contains(h.name)) << h.name << " missing from admin/hosts";
      const std::string& instance = holders.at(h.name);
      EXPECT_TRUE(instances.contains(instance)) << h.name << " holds '" << instance << "'";
      held.insert(instance);
    }
    EXPECT_EQ(held, instances) << "a host holds two instances or an instance two hosts";

    const auto by_host = EngineByHost();
    size_t containers = 0;
    std::set<std::string> on_engine;
    for (size_t i = 0; i < platform_.host_count(); ++i) {
      const E2eHost& h = platform_.host(i);
      const json& list = by_host.at(h.id);
      ASSERT_TRUE(list.is_array()) << "the engine did not answer for " << h.name;
      containers += list.size();
      EXPECT_EQ(list.size(), 1u) << h.name << " (" << h.id << ") on the engine: " << list.dump();
      for (const auto& c : list) {
        EXPECT_EQ(c.value("State", ""), "running") << h.name << ": " << c.dump();
        const json& labels = c["Labels"];
        ASSERT_TRUE(labels.is_object() && labels.contains(kInstanceLabel)) << c.dump();
        EXPECT_EQ(labels[kHostLabel], h.id) << c.dump();
        const std::string instance = labels[kInstanceLabel].get<std::string>();
        EXPECT_EQ(instance, holders.at(h.name))
            << h.name << ": the engine runs another instance than the store placed there";
        on_engine.insert(instance);
      }
    }
    EXPECT_EQ(containers, static_cast<size_t>(kHosts));
    EXPECT_EQ(on_engine, instances);
    // Each instance's containers, looked up by instance label: exactly one, on its host.
    for (const auto& instance : instances) {
      json list = engine_->ContainersWithLabel(kInstanceLabel, instance);
      ASSERT_TRUE(list.is_array());
      EXPECT_EQ(list.size(), 1u) << instance << ": " << list.dump();
    }
  }

  void WaitAgentRounds(int rounds) {
    EXPECT_TRUE(gpuwerk::testing::WaitAgentRounds(*op_, rounds))
        << "the agents did not all sync " << rounds << " more times";
  }

  std::unique_ptr<HttpClient> op_;
};

TEST_F(CapacityRaceE2eTest, C15_FiftyConcurrentCreatesOnThreeRealHosts) {
  const auto t0 = std::chrono::steady_clock::now();
  platform_.StartServer();
  ASSERT_FALSE(HasFatalFailure());
  op_ = platform_.Operator();
  for (const char* name : {"spark-race-a", "spark-race-b", "spark-race-c"}) {
    E2eHost& h = platform_.AddHost(*op_, name);
    ASSERT_FALSE(h.id.empty() || h.token.empty());
    platform_.StartAgent(h, {"--ssh-bind", "127.0.0.1"});
    ASSERT_FALSE(HasFatalFailure());
  }
  ASSERT_TRUE(WaitHostsReady(*op_, static_cast<std::size_t>(kHosts)))
      << "the agents never all synced with a working engine";
  for (const auto& [host, list] : EngineByHost()) {
    ASSERT_EQ(list, json::array()) << "host " << host << " has containers before the race";
  }

  std::vector<Racer> racers;
  racers.reserve(kPeople);
  for (int i = 0; i < kPeople; ++i) {
    racers.push_back(NewRacer(i));
    ASSERT_FALSE(HasFailure()) << "setting up " << racers.back().email;
  }
  const auto t_people = std::chrono::steady_clock::now();

  // The race: every thread waits at the latch until all 50 are there, then creates at once.
  std::vector<HttpResult> results(kPeople);
  std::latch start(kPeople + 1);
  std::vector<std::thread> threads;
  threads.reserve(kPeople);
  for (int i = 0; i < kPeople; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[i] = racers[i].browser->PostJson(
          "/api/v1/instances",
          {{"name", "race"}, {"ssh_key_id", racers[i].key_id}, {"gpu_type", "spark-1x"}});
    });
  }
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
  const auto t_race = std::chrono::steady_clock::now();

  int created = 0, no_capacity = 0;
  std::set<std::string> instances;
  std::map<std::string, int> owner;  // instance id → racer index
  for (int i = 0; i < kPeople; ++i) {
    const HttpResult& r = results[i];
    if (r.status == 201) {
      ++created;
      const std::string id = r.Json().value("id", "");
      EXPECT_FALSE(id.empty()) << r.body;
      EXPECT_EQ(r.Json()["hosts"].size(), 1u) << r.body;
      instances.insert(id);
      owner[id] = i;
    } else {
      EXPECT_EQ(r.status, 409) << racers[i].email << ": " << r.body;
      EXPECT_THAT(r, HasApiCode("no_capacity")) << racers[i].email << ": " << r.body;
      if (r.status == 409 && r.Code() == "no_capacity") ++no_capacity;
    }
  }
  EXPECT_EQ(created, kHosts);
  EXPECT_EQ(no_capacity, kPeople - kHosts);
  ASSERT_EQ(instances.size(), static_cast<size_t>(kHosts)) << "distinct instance ids";

  // Each winner's instance comes up (its container runs and the login is proven); the losers
  // have none.
  for (const auto& [id, i] : owner) {
    json last;
    const bool running = Eventually(
        [&] {
          auto r = racers[i].browser->Get("/api/v1/instances/" + id);
          last = r.Json();
          return r.status == 200 && last.value("status", "") == "running";
        },
        seconds(60));
    EXPECT_TRUE(running) << "instance " << id << " never became running; last: " << last.dump();
  }
  int live = 0;
  for (auto& r : racers) live += r.browser->Get("/api/v1/instances").Json().value("total", -1);
  EXPECT_EQ(live, kHosts);

  // The engine, once the agents have reconciled: one running container per host.
  EXPECT_TRUE(Eventually([&] { return EngineSettled(instances); }, seconds(30)))
      << "the engine never showed one running container per host";
  const auto t_running = std::chrono::steady_clock::now();
  ExpectOneInstancePerHost(instances, "once the instances run");
  // And it stays so over further agent rounds.
  WaitAgentRounds(2);
  ExpectOneInstancePerHost(instances, "after two more agent rounds");

  // Clean up: the winners delete; their containers go and the hosts are free again.
  for (const auto& [id, i] : owner) {
    auto deleted = racers[i].browser->Delete("/api/v1/instances/" + id);
    EXPECT_TRUE(deleted.status == 204 || deleted.status == 202) << id << ": " << deleted.body;
  }
  for (const auto& [id, i] : owner) {
    EXPECT_TRUE(
        Eventually([&] { return racers[i].browser->Get("/api/v1/instances/" + id).status == 404; },
                   seconds(60)))
        << "instance " << id << " was never deleted";
  }
  EXPECT_TRUE(Eventually(
      [&] {
        for (const auto& [host, list] : EngineByHost()) {
          if (list != json::array()) return false;
        }
        return true;
      },
      seconds(30)))
      << "containers are left on the engine";
  for (const auto& [name, instance] : StoreHolders()) {
    EXPECT_EQ(instance, "") << name << " still held after the deletes";
  }
  const auto secs = [](std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  std::cout << "[ timing ] setup " << secs(t0, t_people) << " s, race " << secs(t_people, t_race)
            << " s, to running " << secs(t_race, t_running) << " s, total "
            << secs(t0, std::chrono::steady_clock::now()) << " s\n";
}

}  // namespace
}  // namespace gpuwerk::testing
