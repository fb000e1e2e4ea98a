#pragma once

// A control plane with an operator, fake agents (hosts that sync over HTTP) and helpers for
// people, keys, instances and queue entries: shared by the queue and capacity tests.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "tests/integration/server_fixture.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {

class QueueFixture : public ServerTest {
 protected:
  using json = nlohmann::json;

  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    op_ = SignedInOperator();
    ASSERT_FALSE(HasFailure());
  }

  /// A person signed up as `email` with one SSH key of their own (a key has one account) named
  /// "laptop"; with Card::kRecorded (the default) a payment method on file, so they can launch.
  struct Person {
    std::string email;
    std::unique_ptr<HttpClient> browser;
    std::string key_id;
  };
  Person NewPerson(const std::string& email, Card card = Card::kRecorded) {
    Person p{email, Browser(), ""};
    SignUp(*p.browser, email, "correct horse battery", card);
    const std::string public_key =
        GenerateKey(dir_.path(), "person" + std::to_string(++people_)).public_line;
    EXPECT_FALSE(public_key.empty()) << "ssh-keygen failed";
    auto r =
        p.browser->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", public_key}});
    EXPECT_EQ(r.status, 201) << r.body;
    p.key_id = r.Json().value("id", "");
    return p;
  }

  /// Registers a host of `type` (its sshd on 127.0.0.1) as the operator and brings it online
  /// with one sync.
  std::string AddHost(const std::string& name, const std::string& type = "spark-1x") {
    auto r = op_->PostJson("/api/v1/admin/hosts",
                           {{"name", name}, {"gpu_type", type}, {"ssh_address", "127.0.0.1"}});
    EXPECT_EQ(r.status, 201) << r.body;
    std::string token = r.Json().value("token", "");
    tokens_[name] = token;
    EXPECT_EQ(Sync(name).status, 200);
    return token;
  }
  /// One fake agent round of host `name`, reporting `containers` and `failures`.
  /// `drift` (docs/agent-protocol.md "Drift") is sent only when not null.
  HttpResult Sync(const std::string& name, json containers = json::array(),
                  json failures = json::array(), json drift = nullptr) {
    HttpClient agent(app_->base_url());
    agent.SetBearer(tokens_[name]);
    json body = {{"agent_version", "0.1.0"},
                 {"inventory", {{"addresses", json::array()}, {"cpus", 2}}},
                 {"engine", {{"ok", true}, {"error", ""}}},
                 {"containers", containers},
                 {"failures", failures}};
    if (!drift.is_null()) body["drift"] = std::move(drift);
    return agent.PostJson("/api/v1/agent/sync", body);
  }
  /// Links hosts `a` (node 0) and `b` into a pair as the operator.
  HttpResult Link(const std::string& a, const std::string& rail_a, const std::string& b,
                  const std::string& rail_b) {
    return op_->PostJson(
        "/api/v1/admin/host-pairs",
        {{"hosts",
          {{{"name", a}, {"rail_address", rail_a}}, {{"name", b}, {"rail_address", rail_b}}}}});
  }
  /// The operator's view of host `name` (null when not listed).
  json HostItem(const std::string& name) {
    const json hosts = op_->Get("/api/v1/admin/hosts").Json();
    for (const auto& h : hosts["items"]) {
      if (h["name"] == name) return h;
    }
    return nullptr;
  }
  /// GET /api/v1/gpu-types' item for `type` as `who` sees it.
  json TypeItem(HttpClient& who, const std::string& type) {
    const json types = who.Get("/api/v1/gpu-types").Json();
    for (const auto& t : types["items"]) {
      if (t["name"] == type) return t;
    }
    return nullptr;
  }
  /// The instance id host `name` holds, "" when free.
  std::string InstanceOn(const std::string& name) {
    const json hosts = op_->Get("/api/v1/admin/hosts").Json();
    for (const auto& h : hosts["items"]) {
      if (h["name"] == name && h["instance_id"].is_string()) return h["instance_id"];
    }
    return "";
  }

  HttpResult Create(Person& p, const std::string& name, std::vector<std::string> headers = {},
                    const std::string& type = "spark-1x") {
    return p.browser->PostJson("/api/v1/instances",
                               {{"name", name}, {"ssh_key_id", p.key_id}, {"gpu_type", type}},
                               std::move(headers));
  }
  HttpResult Join(Person& p, const std::string& name, const std::string& type = "spark-1x",
                  std::vector<std::string> headers = {}) {
    return p.browser->PostJson("/api/v1/queue-entries",
                               {{"name", name}, {"ssh_key_id", p.key_id}, {"gpu_type", type}},
                               std::move(headers));
  }

  std::unique_ptr<HttpClient> op_;
  int people_ = 0;  ///< persons made so far (each gets a key file of its own)
  std::map<std::string, std::string> tokens_;
};

}  // namespace gpuwerk::testing
