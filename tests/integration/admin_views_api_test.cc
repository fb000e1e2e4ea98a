// The operator's views of everyone over real HTTP (docs/api.md "Operators: people, instances,
// queues"): every person's instances with owner, team, hosts and states (filtered by host and
// status, keyset paged), every open queue entry in queue order with its position and owner, the
// people (keyset paged) and the operator flag (audited; the last operator's stays), the sign-up
// policy as configured; 403 for others and the stable codes of bad input.
#include <gtest/gtest.h>

#include <set>

#include "tests/integration/queue_fixture.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class AdminViewsApiTest : public QueueFixture {
 protected:
  /// The item of `page` whose `key` is `value` (null when none).
  static json ItemWith(const json& page, const std::string& key, const std::string& value) {
    for (const auto& i : page["items"]) {
      if (i.value(key, "") == value) return i;
    }
    return nullptr;
  }
};

TEST_F(AdminViewsApiTest, InstancesOfEveryoneWithOwnerHostsAndStates) {
  AddHost("spark-a");
  AddHost("spark-b");
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  auto a = Create(alice, "alpha");
  ASSERT_EQ(a.status, 201) << a.body;
  clock_.Advance(std::chrono::seconds(5));
  auto b = Create(bob, "beta");
  ASSERT_EQ(b.status, 201) << b.body;
  const std::string bob_host = b.Json()["hosts"][0];

  auto all = op_->Get("/api/v1/admin/instances");
  ASSERT_EQ(all.status, 200) << all.body;
  json page = all.Json();
  EXPECT_EQ(page["total"], 2);
  EXPECT_EQ(page["page"], 1);
  EXPECT_EQ(page["pages"], 1);
  EXPECT_FALSE(page.contains("next"));
  EXPECT_FALSE(page.contains("prev"));
  ASSERT_EQ(page["items"].size(), 2u);
  EXPECT_EQ(page["items"][0]["name"], "beta") << "newest first";
  const json beta = page["items"][0];
  EXPECT_EQ(beta["owner"]["email"], "bob@example.test");
  EXPECT_EQ(beta["owner"]["id"], bob.browser->Get("/api/v1/me").Json()["id"]);
  EXPECT_TRUE(beta["team"].is_null());
  EXPECT_EQ(beta["gpu_type"], "spark-1x");
  EXPECT_EQ(beta["hosts"], json::array({bob_host}));
  EXPECT_EQ(beta["desired"], "running");
  EXPECT_EQ(beta["status"], "provisioning");
  EXPECT_TRUE(beta["deleted_at"].is_null());
  EXPECT_FALSE(beta.contains("ssh_command")) << "operators get no one's SSH command";

  // By host, by status; a deleted instance only with deleted=true.
  page = op_->Get("/api/v1/admin/instances?host=" + bob_host).Json();
  ASSERT_EQ(page["items"].size(), 1u) << page;
  EXPECT_EQ(page["items"][0]["name"], "beta");
  EXPECT_EQ(op_->Get("/api/v1/admin/instances?status=running").Json()["total"], 0);
  EXPECT_EQ(op_->Get("/api/v1/admin/instances?status=provisioning").Json()["total"], 2);
  ASSERT_EQ(alice.browser->Delete("/api/v1/instances/alpha").status, 204);
  // alpha holds a host until its agent reports the container gone: deleting, still live.
  EXPECT_EQ(ItemWith(op_->Get("/api/v1/admin/instances").Json(), "name", "alpha")["desired"],
            "deleted");
  EXPECT_EQ(Sync(a.Json()["hosts"][0].get<std::string>()).status, 200);  // its container is gone
  EXPECT_EQ(op_->Get("/api/v1/admin/instances").Json()["total"], 1);
  page = op_->Get("/api/v1/admin/instances?deleted=true").Json();
  EXPECT_EQ(page["total"], 2);
  EXPECT_FALSE(ItemWith(page, "name", "alpha")["deleted_at"].is_null());

  // Bad input: stable codes, nothing else.
  ExpectProblem(op_->Get("/api/v1/admin/instances?status=sleeping"), 400, "invalid_status");
  ExpectProblem(op_->Get("/api/v1/admin/instances?deleted=maybe"), 400, "invalid_query");
  ExpectProblem(op_->Get("/api/v1/admin/instances?before=nope"), 400, "invalid_cursor");
  ExpectProblem(op_->Get("/api/v1/admin/instances?before=1.ins_a&after=1.ins_b"), 400,
                "invalid_cursor");
  ExpectProblem(op_->Get("/api/v1/admin/instances?host=" + std::string(300, 'a')), 400,
                "invalid_query");
  // Not an operator.
  ExpectProblem(alice.browser->Get("/api/v1/admin/instances"), 403, "forbidden");
}

TEST_F(AdminViewsApiTest, QueueOfEveryTypeInOrderWithPositionsAndOwners) {
  AddHost("spark-a");
  Person alice = NewPerson("alice@example.test");
  Person bob = NewPerson("bob@example.test");
  Person carol = NewPerson("carol@example.test");
  ASSERT_EQ(Create(alice, "alpha").status, 201);
  ASSERT_EQ(Join(bob, "beta").status, 201);
  clock_.Advance(std::chrono::seconds(3));
  ASSERT_EQ(Join(carol, "gamma").status, 201);
  ASSERT_EQ(Join(carol, "delta", "spark-2x").status, 201);

  auto r = op_->Get("/api/v1/admin/queue");
  ASSERT_EQ(r.status, 200) << r.body;
  json page = r.Json();
  EXPECT_EQ(page["total"], 3);
  ASSERT_EQ(page["items"].size(), 3u);
  // By GPU type, then queue order.
  EXPECT_EQ(page["items"][0]["name"], "beta");
  EXPECT_EQ(page["items"][0]["position"], 1);
  EXPECT_EQ(page["items"][0]["owner"]["email"], "bob@example.test");
  EXPECT_EQ(page["items"][1]["name"], "gamma");
  EXPECT_EQ(page["items"][1]["position"], 2);
  EXPECT_EQ(page["items"][2]["gpu_type"], "spark-2x");
  EXPECT_EQ(page["items"][2]["position"], 1);
  EXPECT_TRUE(page["items"][0]["entered_at"].is_string());

  page = op_->Get("/api/v1/admin/queue?gpu_type=spark-2x").Json();
  ASSERT_EQ(page["items"].size(), 1u);
  EXPECT_EQ(page["items"][0]["name"], "delta");

  // bob leaves: carol moves up.
  ASSERT_EQ(bob.browser->Delete("/api/v1/queue-entries/beta").status, 204);
  page = op_->Get("/api/v1/admin/queue?gpu_type=spark-1x").Json();
  ASSERT_EQ(page["items"].size(), 1u);
  EXPECT_EQ(page["items"][0]["position"], 1);

  ExpectProblem(op_->Get("/api/v1/admin/queue?page=0"), 400, "invalid_page");
  ExpectProblem(alice.browser->Get("/api/v1/admin/queue"), 403, "forbidden");
}

TEST_F(AdminViewsApiTest, PeopleAreKeysetPagedNewestFirst) {
  // The operator plus 16 invited people: two pages.
  for (int i = 0; i < 16; ++i) {
    clock_.Advance(std::chrono::seconds(1));
    auto r = op_->PostJson("/api/v1/admin/invites",
                           {{"email", "p" + std::to_string(i) + "@example.test"}});
    ASSERT_EQ(r.status, 201) << r.body;
  }
  json first = op_->Get("/api/v1/admin/people").Json();
  EXPECT_EQ(first["total"], 17);
  EXPECT_EQ(first["pages"], 2);
  EXPECT_EQ(first["page"], 1);
  ASSERT_EQ(first["items"].size(), 15u);
  EXPECT_EQ(first["items"][0]["email"], "p15@example.test");
  EXPECT_EQ(first["items"][0]["is_operator"], false);
  EXPECT_EQ(first["items"][0]["email_proven"], false);
  EXPECT_TRUE(first["items"][0]["team"].is_null());
  ASSERT_TRUE(first.contains("next"));
  EXPECT_FALSE(first.contains("prev"));

  // A person arriving meanwhile does not move the older page.
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_EQ(op_->PostJson("/api/v1/admin/invites", {{"email", "late@example.test"}}).status, 201);
  json second = op_->Get("/api/v1/admin/people?before=" + first["next"].get<std::string>()).Json();
  ASSERT_EQ(second["items"].size(), 2u) << second;
  EXPECT_EQ(second["items"][0]["email"], "p0@example.test");
  EXPECT_EQ(second["items"][1]["email"], "op@example.test");
  EXPECT_EQ(second["items"][1]["is_operator"], true);
  EXPECT_FALSE(second.contains("next"));
  ASSERT_TRUE(second.contains("prev"));
  json back = op_->Get("/api/v1/admin/people?after=" + second["prev"].get<std::string>()).Json();
  ASSERT_EQ(back["items"].size(), 15u);
  EXPECT_EQ(back["items"][0]["email"], "p15@example.test");
  EXPECT_TRUE(back.contains("prev")) << "late@ is newer now";

  ExpectProblem(op_->Get("/api/v1/admin/people?after=12.PER"), 400, "invalid_cursor");
}

TEST_F(AdminViewsApiTest, OperatorFlagIsAuditedAndTheLastOperatorStays) {
  Person bob = NewPerson("bob@example.test");
  ExpectProblem(bob.browser->Get("/api/v1/admin/people"), 403, "forbidden");
  ExpectProblem(bob.browser->Send("PUT", "/api/v1/admin/people/bob@example.test/operator", "", {}),
                403, "forbidden");

  auto set = op_->Send("PUT", "/api/v1/admin/people/Bob@Example.test/operator", "", {});
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(set.Json()["email"], "bob@example.test");
  EXPECT_EQ(set.Json()["is_operator"], true);
  // From bob's next request on.
  EXPECT_EQ(bob.browser->Get("/api/v1/admin/people").status, 200);
  EXPECT_EQ(bob.browser->Get("/api/v1/me").Json()["is_operator"], true);
  // Again: nothing changes, no second audit event.
  EXPECT_EQ(op_->Send("PUT", "/api/v1/admin/people/bob@example.test/operator", "", {}).status, 200);

  // bob clears the first operator's flag; then bob is the last one and cannot clear his own.
  clock_.Advance(std::chrono::seconds(1));  // the audit log's order is by time
  ASSERT_EQ(bob.browser->Delete("/api/v1/admin/people/op@example.test/operator").status, 200);
  ExpectProblem(op_->Get("/api/v1/admin/people"), 403, "forbidden");
  ExpectProblem(bob.browser->Delete("/api/v1/admin/people/bob@example.test/operator"), 409,
                "last_operator");
  EXPECT_EQ(bob.browser->Get("/api/v1/me").Json()["is_operator"], true);

  // Bad input.
  ExpectProblem(
      bob.browser->Send("PUT", "/api/v1/admin/people/nobody@example.test/operator", "", {}), 404,
      "not_found");
  ExpectProblem(bob.browser->Send("PUT", "/api/v1/admin/people/not-an-address/operator", "", {}),
                400, "invalid_email");
  ExpectProblem(bob.browser->Send("PUT", "/api/v1/admin/people/op@example.test/operator",
                                  R"({"on": true})", {"Content-Type: application/json"}),
                400, "invalid_field");

  // The audit log: one event per change, by whom, of whom.
  json audit = bob.browser->Get("/api/v1/admin/audit").Json();
  std::vector<std::string> actions;
  for (const auto& e : audit["items"]) {
    const std::string action = e["action"];
    if (action == "person.set_operator" || action == "person.clear_operator") {
      actions.push_back(action + " " + e["detail"].value("email", "") + " by " +
                        e["actor_email"].get<std::string>());
    }
  }
  EXPECT_EQ(actions,
            (std::vector<std::string>{"person.clear_operator op@example.test by bob@example.test",
                                      "person.set_operator bob@example.test by op@example.test"}));
}

TEST_F(AdminViewsApiTest, SignUpPolicyIsTheConfiguredOne) {
  auto r = op_->Get("/api/v1/admin/sign-up-policy");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["policy"], "open");
  EXPECT_EQ(r.Json()["domains"], json::array());
  Person bob = NewPerson("bob@example.test");
  ExpectProblem(bob.browser->Get("/api/v1/admin/sign-up-policy"), 403, "forbidden");
}

class AdminViewsDomainsTest : public QueueFixture {
 protected:
  void Customize(app::ServerConfig& config) override {
    config.sign_up_policy = "domains";
    config.sign_up_domains = {"example.test", "lab.example"};
  }
};

TEST_F(AdminViewsDomainsTest, SignUpPolicyShowsTheDomains) {
  json policy = op_->Get("/api/v1/admin/sign-up-policy").Json();
  EXPECT_EQ(policy["policy"], "domains");
  EXPECT_EQ(policy["domains"], json::array({"example.test", "lab.example"}));
}

}  // namespace
}  // namespace gpuwerk::testing
