// Teams over real HTTP (R-15, R-17; docs/teams.md): every /api/v1/team route, what an invitation
// link is for (the preview the dashboard's page reads), the role rules for every kind of caller
// through a browser cookie and through an API token, the mails (the server's Maildir outbox), and
// what a membership change does to billing sessions (read from the store).

#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "billing/billing_session_table.h"
#include "sched/instance_table.h"
#include "tests/integration/server_fixture.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

constexpr char kInvitePath[] = "/team/accept";

class TeamsApiTest : public ServerTest {
 protected:
  /// A signed-in browser of a new proven person `email`, connecting from `source` (sign-ups are
  /// rate limited per source address).
  std::unique_ptr<HttpClient> Person(const std::string& email,
                                     const std::string& source = "127.0.0.1") {
    auto b = Browser();
    b->SetSourceAddress(source);
    SignUp(*b, email);
    return b;
  }
  /// A client that holds only a new API token of the person signed in in `browser`.
  std::unique_ptr<HttpClient> TokenClient(HttpClient& browser) {
    auto r = browser.PostJson("/api/v1/tokens", {{"name", "cli"}});
    EXPECT_EQ(r.status, 201) << r.body;
    auto c = Browser();
    c->SetBearer(r.Json().value("token", ""));
    return c;
  }
  /// `owner` invites `email` and returns the link's token from the mail.
  std::string Invite(HttpClient& owner, const std::string& email) {
    const auto seen = LinkTokens(email, kInvitePath, 0);
    auto r = owner.PostJson("/api/v1/team/invites", {{"email", email}});
    EXPECT_TRUE(r.status == 201 || r.status == 200) << r.body;
    return NewLinkToken(email, kInvitePath, seen);
  }
  /// `owner` invites the person signed in in `browser` as `email`, who accepts.
  void Join(HttpClient& owner, HttpClient& browser, const std::string& email) {
    const std::string token = Invite(owner, email);
    auto r = browser.PostJson("/api/v1/team/invites/accept", {{"token", token}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::string PersonId(HttpClient& who) {
    auto me = who.Get("/api/v1/me");
    EXPECT_EQ(me.status, 200) << me.body;
    return me.Json().value("id", "");
  }
  json Team(HttpClient& who) {
    auto r = who.Get("/api/v1/team");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json();
  }
  size_t MailCount(const std::string& to) {
    (void)app_->DeliverMailNow();
    return MailsTo(config_.data_dir / "mail", to).size();
  }
};

TEST_F(TeamsApiTest, CreateShowInviteAcceptAndTheOwnerAloneSeesInvitations) {
  auto ada = Person("ada@example.test");
  auto made = ada->PostJson("/api/v1/team", {{"name", "  Lab One "}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.Json()["name"], "Lab One");
  EXPECT_EQ(made.Json()["my_role"], "owner");
  ASSERT_EQ(made.Json()["members"].size(), 1u);
  EXPECT_EQ(made.Json()["members"][0]["email"], "ada@example.test");
  EXPECT_TRUE(made.Json()["invites"].empty());

  ExpectProblem(ada->PostJson("/api/v1/team", {{"name", "Second"}}), 409, "already_in_team");
  auto grace = Person("grace@example.test");
  ExpectProblem(grace->PostJson("/api/v1/team", {{"name", "lab one"}}), 409, "team_name_taken");
  ExpectProblem(grace->PostJson("/api/v1/team", {{"name", "bad/name"}}), 400, "invalid_name");
  ExpectProblem(grace->PostJson("/api/v1/team", {{"name", "x"}, {"extra", 1}}), 400,
                "invalid_field");

  const std::string token = Invite(*ada, "grace@example.test");
  ASSERT_FALSE(token.empty());
  auto mails = Mails("grace@example.test", 1);
  ASSERT_FALSE(mails.empty());
  EXPECT_NE(mails.back().text_body.find("Lab One"), std::string::npos) << mails.back().text_body;
  EXPECT_NE(mails.back().text_body.find("ada@example.test"), std::string::npos);

  auto owner_view = Team(*ada);
  ASSERT_EQ(owner_view["invites"].size(), 1u);
  EXPECT_EQ(owner_view["invites"][0]["email"], "grace@example.test");

  auto accepted = grace->PostJson("/api/v1/team/invites/accept", {{"token", token}});
  ASSERT_EQ(accepted.status, 200) << accepted.body;
  EXPECT_EQ(accepted.Json()["my_role"], "member");
  EXPECT_FALSE(accepted.Json().contains("invites"));  // members see no invitations
  auto member_view = Team(*grace);
  EXPECT_EQ(member_view["members"].size(), 2u);
  EXPECT_FALSE(member_view.contains("invites"));
  EXPECT_TRUE(Team(*ada)["invites"].empty());  // used: no longer pending

  // GET /api/v1/me names each one's team and role; someone in no team gets nulls.
  auto ada_me = ada->Get("/api/v1/me").Json();
  EXPECT_EQ(ada_me["team"]["name"], "Lab One");
  EXPECT_EQ(ada_me["team"]["id"], made.Json()["id"]);
  EXPECT_EQ(ada_me["role"], "owner");
  auto grace_me = grace->Get("/api/v1/me").Json();
  EXPECT_EQ(grace_me["team"]["id"], made.Json()["id"]);
  EXPECT_EQ(grace_me["role"], "member");
  EXPECT_EQ(grace_me["billing"]["account"]["kind"], "team");
  auto loner_me = Person("lin@example.test")->Get("/api/v1/me").Json();
  EXPECT_TRUE(loner_me["team"].is_null());
  EXPECT_TRUE(loner_me["role"].is_null());
}

TEST_F(TeamsApiTest, AcceptMatchesTheAddressCaseInsensitivelyAndOnlyThatAddress) {
  auto ada = Person("ada@example.test");
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  const std::string token = Invite(*ada, "Bob.Case@Example.TEST");
  ASSERT_FALSE(token.empty());

  // Someone else signed in: 403, and the invitation stays usable.
  auto eve = Person("eve@example.test");
  ExpectProblem(eve->PostJson("/api/v1/team/invites/accept", {{"token", token}}), 403,
                "invite_for_another_address");
  // The invited address typed in another case accepts.
  auto bob = Person("bob.case@example.test");
  auto accepted = bob->PostJson("/api/v1/team/invites/accept", {{"token", token}});
  ASSERT_EQ(accepted.status, 200) << accepted.body;
  EXPECT_EQ(Team(*ada)["members"].size(), 2u);
  // Used: 410 invite_gone, nothing more created.
  ExpectProblem(bob->PostJson("/api/v1/team/invites/accept", {{"token", token}}), 410,
                "invite_gone");
  ExpectProblem(eve->PostJson("/api/v1/team/invites/accept", {{"token", "nonsense"}}), 410,
                "invite_gone");
  EXPECT_EQ(Team(*ada)["members"].size(), 2u);
}

TEST_F(TeamsApiTest, ARevokedInviteIsGoneAndCreatesNothing) {
  auto ada = Person("ada@example.test");
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  const std::string token = Invite(*ada, "carol@example.test");
  const std::string id = Team(*ada)["invites"][0]["id"];
  ASSERT_EQ(ada->Delete("/api/v1/team/invites/" + id).status, 204);
  ExpectProblem(ada->Delete("/api/v1/team/invites/" + id), 410, "invite_gone");
  ExpectProblem(ada->Delete("/api/v1/team/invites/inv_unknown"), 404, "not_found");

  auto carol = Person("carol@example.test");
  ExpectProblem(carol->PostJson("/api/v1/team/invites/accept", {{"token", token}}), 410,
                "invite_gone");
  ExpectProblem(carol->Get("/api/v1/team"), 404, "no_team");
  EXPECT_EQ(Team(*ada)["members"].size(), 1u);
  // What the link's page reads says so too.
  ExpectProblem(carol->PostJson("/api/v1/team/invites/preview", {{"token", token}}), 410,
                "invite_gone");
}

TEST_F(TeamsApiTest, InvitingAMemberSendsNothingAndInvitingTwiceResendsOneInvitation) {
  auto ada = Person("ada@example.test");
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  auto dan = Person("dan@example.test");
  Join(*ada, *dan, "dan@example.test");
  const size_t before = MailCount("dan@example.test");
  ExpectProblem(ada->PostJson("/api/v1/team/invites", {{"email", "DAN@example.test"}}), 409,
                "already_member");
  EXPECT_EQ(MailCount("dan@example.test"), before);
  ExpectProblem(ada->PostJson("/api/v1/team/invites", {{"email", "not an address"}}), 400,
                "invalid_email");

  const std::string first = Invite(*ada, "fay@example.test");
  auto again = ada->PostJson("/api/v1/team/invites", {{"email", "fay@example.test"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["resent"], true);
  const std::string second = NewLinkToken("fay@example.test", kInvitePath, {first});
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(Mails("fay@example.test", 2).size(), 2u);
  EXPECT_EQ(Team(*ada)["invites"].size(), 1u);  // one pending invitation

  auto fay = Person("fay@example.test");
  ExpectProblem(fay->PostJson("/api/v1/team/invites/accept", {{"token", first}}), 410,
                "invite_gone");
  EXPECT_EQ(fay->PostJson("/api/v1/team/invites/accept", {{"token", second}}).status, 200);
}

TEST_F(TeamsApiTest, ThePreviewNamesTheTeamAndAcceptsNothingOnlyAcceptDoes) {
  auto ada = Person("ada@example.test");
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab <b>"}}).status, 400);
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  const std::string token = Invite(*ada, "gus@example.test");
  auto gus = Person("gus@example.test");
  // What the dashboard's /team/accept page reads, signed in or not, as often as it likes: the
  // team and the invited address; nothing is used up (a mail scanner accepts nothing).
  auto anon = Browser();
  for (HttpClient* who : {anon.get(), gus.get(), anon.get()}) {
    auto preview = who->PostJson("/api/v1/team/invites/preview", {{"token", token}});
    ASSERT_EQ(preview.status, 200) << preview.body;
    EXPECT_EQ(preview.Json()["team_name"], "Lab");
    EXPECT_EQ(preview.Json()["email"], "gus@example.test");
    EXPECT_TRUE(preview.Json()["expires_at"].is_string()) << preview.body;
  }
  EXPECT_EQ(Team(*ada)["members"].size(), 1u);
  EXPECT_EQ(Team(*ada)["invites"].size(), 1u);
  ExpectProblem(anon->PostJson("/api/v1/team/invites/preview", {{"token", "not-a-token"}}), 410,
                "invite_gone");
  ExpectProblem(anon->PostJson("/api/v1/team/invites/preview", json::object()), 400,
                "invalid_field");
  // Signed out, accepting is refused and the invitation stays.
  ExpectProblem(anon->PostJson("/api/v1/team/invites/accept", {{"token", token}}), 401,
                "unauthenticated");
  EXPECT_EQ(Team(*ada)["members"].size(), 1u);
  // Another site's request with gus's cookie is refused.
  ExpectProblem(gus->PostJson("/api/v1/team/invites/accept", {{"token", token}},
                              {"Origin: https://evil.example"}),
                403, "origin_mismatch");
  EXPECT_EQ(Team(*ada)["members"].size(), 1u);
  // The page's button, signed in as the invited address, accepts; the link is then gone.
  ASSERT_EQ(gus->PostJson("/api/v1/team/invites/accept", {{"token", token}}).status, 200);
  EXPECT_EQ(Team(*ada)["members"].size(), 2u);
  ExpectProblem(gus->PostJson("/api/v1/team/invites/preview", {{"token", token}}), 410,
                "invite_gone");
  ExpectProblem(gus->PostJson("/api/v1/team/invites/accept", {{"token", token}}), 410,
                "invite_gone");
}

TEST_F(TeamsApiTest, TheLastOwnerCanNeitherLeaveNorBeRemovedNorDemoted) {
  auto ada = Person("ada@example.test");
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  const std::string ada_id = PersonId(*ada);
  auto hal = Person("hal@example.test");
  Join(*ada, *hal, "hal@example.test");
  const std::string hal_id = PersonId(*hal);
  ExpectProblem(ada->Send("POST", "/api/v1/team/leave", "", {}), 409, "last_owner");
  ExpectProblem(ada->Delete("/api/v1/team/members/" + ada_id), 409, "last_owner");
  ExpectProblem(ada->Send("PUT", "/api/v1/team/members/" + ada_id + "/role", R"({"role":"member"})",
                          {"Content-Type: application/json"}),
                409, "last_owner");
  ExpectProblem(ada->Send("PUT", "/api/v1/team/members/" + ada_id + "/role", R"({"role":"admin"})",
                          {"Content-Type: application/json"}),
                400, "invalid_role");

  auto promoted = ada->Send("PUT", "/api/v1/team/members/" + hal_id + "/role",
                            R"({"role":"owner"})", {"Content-Type: application/json"});
  ASSERT_EQ(promoted.status, 200) << promoted.body;
  EXPECT_EQ(promoted.Json()["role"], "owner");
  // Two owners: the first may go now, and hal is the last.
  EXPECT_EQ(ada->Send("POST", "/api/v1/team/leave", "", {}).status, 204);
  ExpectProblem(ada->Get("/api/v1/team"), 404, "no_team");
  EXPECT_EQ(Team(*hal)["members"].size(), 1u);
}

// The team's last member, its only owner, may leave: the team closes, its pending invitations
// are revoked at once (nobody joins a team without an owner), and its invoices stay its own.
TEST_F(TeamsApiTest, TheLastMemberLeavingClosesTheTeam) {
  auto ada = Person("ada@example.test");
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  const std::string team_id = Team(*ada)["id"];
  const std::string token = Invite(*ada, "gus@example.test");
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(ada->Send("POST", "/api/v1/team/leave", "", {}).status, 204);
  ExpectProblem(ada->Get("/api/v1/team"), 404, "no_team");

  auto gus = Person("gus@example.test");
  ExpectProblem(gus->PostJson("/api/v1/team/invites/accept", {{"token", token}}), 410,
                "invite_gone");
  ExpectProblem(gus->Get("/api/v1/team"), 404, "no_team");

  auto op = SignedInOperator();
  auto audit = op->Get("/api/v1/admin/audit?target=" + team_id);
  ASSERT_EQ(audit.status, 200) << audit.body;
  bool closed = false;
  const json events = audit.Json();  // kept: a range over a temporary's member would dangle
  for (const json& e : events["items"]) {
    if (e["action"] == "team.leave") closed = e["detail"].value("closed", false);
  }
  EXPECT_TRUE(closed) << audit.body;
}

TEST_F(TeamsApiTest, RemovalMailsTheMemberWhoFallsBackToNoTeam) {
  auto ada = Person("ada@example.test");
  ASSERT_EQ(ada->PostJson("/api/v1/team", {{"name", "Lab"}}).status, 201);
  auto ivy = Person("ivy@example.test");
  Join(*ada, *ivy, "ivy@example.test");
  const size_t before = MailCount("ivy@example.test");
  ASSERT_EQ(ada->Delete("/api/v1/team/members/" + PersonId(*ivy)).status, 204);
  auto mails = Mails("ivy@example.test", before + 1);
  ASSERT_EQ(mails.size(), before + 1);
  bool found = false;
  for (const auto& m : mails)
    found |= m.text_body.find("Lab") != std::string::npos &&
             m.subject.find("removed") != std::string::npos;
  EXPECT_TRUE(found);
  ExpectProblem(ivy->Get("/api/v1/team"), 404, "no_team");
  ExpectProblem(ada->Delete("/api/v1/team/members/" + PersonId(*ivy)), 404, "not_found");
}

// R-15: the creator's running instance moves to the team; a member's launches are billed to the
// team; removal deletes those and ends their billing sessions at that moment, leaves their solo
// ones alone, and their next launch is billed to them.
TEST_F(TeamsApiTest, BillingFollowsTheMembershipAndRemovalEndsTeamBilledSessions) {
  auto op = SignedInOperator();
  ASSERT_FALSE(HasFailure());
  std::vector<std::string> agent_tokens;
  for (const char* host : {"h1", "h2", "h3", "h4"}) {
    auto added = op->PostJson("/api/v1/admin/hosts", {{"name", host},
                                                      {"gpu_type", "spark-1x"},
                                                      {"gpu_required", true},
                                                      {"ssh_address", "127.0.0.1"}});
    ASSERT_EQ(added.status, 201) << added.body;
    agent_tokens.push_back(added.Json()["token"]);
  }
  // One fake agent round of every host (a host not heard from for 30 s gets no instances).
  auto sync_all = [&] {
    for (const auto& token : agent_tokens) {
      HttpClient agent(app_->base_url());
      agent.SetBearer(token);
      auto synced = agent.PostJson("/api/v1/agent/sync",
                                   {{"agent_version", "0.1.0"},
                                    {"inventory", {{"addresses", json::array()}, {"cpus", 2}}},
                                    {"engine", {{"ok", true}, {"error", ""}}},
                                    {"containers", json::array()},
                                    {"failures", json::array()}});
      EXPECT_EQ(synced.status, 200) << synced.body;
    }
  };
  sync_all();
  auto key_of = [&](HttpClient& who, const std::string& file) {
    auto key = GenerateKey(dir_.path(), file);
    auto r = who.PostJson("/api/v1/ssh-keys", {{"name", "k"}, {"public_key", key.public_line}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  };
  auto launch = [&](HttpClient& who, const std::string& name, const std::string& key) {
    auto r = who.PostJson("/api/v1/instances",
                          {{"name", name}, {"ssh_key_id", key}, {"gpu_type", "spark-1x"}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", "");
  };
  struct SessionState {
    std::string account;
    std::optional<int64_t> ended_at;
  };
  auto session_of = [&](const std::string& instance_id) {
    auto s = app_->database().Read([&](store::Transaction& tx) -> core::Result<SessionState> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, sched::InstanceTable::Find(tx, instance_id));
      if (!row) return core::NotFound("instance");
      GPUWERK_ASSIGN_OR_RETURN(auto session,
                               billing::BillingSessionTable::Find(tx, row->billing_session_id));
      if (!session) return core::NotFound("session");
      return SessionState{session->billing_account_id, session->ended_at};
    });
    EXPECT_TRUE(s) << s.error().message;
    return s ? *s : SessionState{};
  };

  auto ada = Person("ada@example.test");
  auto jon = Person("jon@example.test");
  const std::string ada_key = key_of(*ada, "ada");
  const std::string jon_key = key_of(*jon, "jon");
  const std::string ada_id = PersonId(*ada);
  const std::string jon_id = PersonId(*jon);
  const std::string ada_box = launch(*ada, "ada-box", ada_key);
  const std::string jon_solo = launch(*jon, "jon-solo", jon_key);
  EXPECT_EQ(session_of(ada_box).account, "solo_" + ada_id);

  auto made = ada->PostJson("/api/v1/team", {{"name", "Lab"}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string team_id = made.Json()["id"];
  EXPECT_EQ(session_of(ada_box).account, team_id);  // moved whole, billed once
  // A team starts without a card (ada's own stays hers): the operator records the team's.
  RecordTestCard("ada@example.test");

  Join(*ada, *jon, "jon@example.test");
  const std::string jon_team = launch(*jon, "jon-team", jon_key);
  EXPECT_EQ(session_of(jon_team).account, team_id);
  EXPECT_EQ(session_of(jon_solo).account, "solo_" + jon_id);

  // What the relays hear (docs/ssh.md "Revocation"): published once the removal commits, before
  // the answer.
  std::mutex published_mu;
  std::vector<std::string> published;
  const uint64_t listener = app_->access_changes().Subscribe([&](const core::AccessChange& c) {
    std::lock_guard lock(published_mu);
    published.insert(published.end(), c.instance_ids.begin(), c.instance_ids.end());
  });
  clock_.Advance(std::chrono::seconds(125));
  const int64_t removed_at = clock_.NowUnix();
  ASSERT_EQ(ada->Delete("/api/v1/team/members/" + jon_id).status, 204);
  app_->access_changes().Unsubscribe(listener);
  {
    std::lock_guard lock(published_mu);
    EXPECT_EQ(published, std::vector<std::string>{jon_team});
  }
  EXPECT_EQ(session_of(jon_team).ended_at, removed_at);
  EXPECT_FALSE(session_of(jon_solo).ended_at.has_value());
  EXPECT_FALSE(session_of(ada_box).ended_at.has_value());
  auto gone = jon->Get("/api/v1/instances/" + jon_team);
  EXPECT_TRUE(gone.status == 404 || gone.Json().value("status", "") == "deleting" ||
              gone.Json().value("status", "") == "deleted")
      << gone.body;
  auto solo = jon->Get("/api/v1/instances/" + jon_solo);
  EXPECT_EQ(solo.status, 200) << solo.body;

  sync_all();
  const std::string jon_again = launch(*jon, "jon-again", jon_key);
  EXPECT_EQ(session_of(jon_again).account, "solo_" + jon_id);

  // The owner's usage by person (docs/teams.md "Usage by member"): the removed member is still
  // there, their solo launches are not, and the rows add up to the team's running total.
  clock_.Advance(std::chrono::seconds(60));
  auto usage = ada->Get("/api/v1/team/usage");
  ASSERT_EQ(usage.status, 200) << usage.body;
  const json people = usage.Json()["people"];
  ASSERT_EQ(people.size(), 2u) << usage.body;
  int64_t sum = 0;
  for (const json& p : people) {
    sum += p["amount_minor"].get<int64_t>();
    EXPECT_EQ(p["member"], p["person_id"] == ada_id) << p.dump();
    EXPECT_EQ(p["label"], p["person_id"] == ada_id ? "ada@example.test" : "jon@example.test");
  }
  ASSERT_EQ(usage.Json()["totals"].size(), 1u) << usage.body;
  EXPECT_EQ(usage.Json()["totals"][0]["amount_minor"], sum);
  const json running = ada->Get("/api/v1/billing").Json()["current_month"];
  EXPECT_EQ(running["totals"], usage.Json()["totals"]);
  EXPECT_EQ(running["month"], usage.Json()["month"]);
  ExpectProblem(jon->Get("/api/v1/team/usage"), 404, "no_team");
  ExpectProblem(ada->Get("/api/v1/team/usage?month=2026-13"), 400, "invalid_month");
  // Two months asked for: refused, never silently the first.
  ExpectProblem(ada->Get("/api/v1/team/usage?month=2026-01&month=2026-02"), 400,
                "duplicate_query_parameter");
}

// The operator records and clears a team's card by the team's id or exact name (docs/billing.md
// "Manual provider"); a member's address is refused; audited like a person's card.
TEST_F(TeamsApiTest, TheOperatorSetsATeamsCardByItsIdOrName) {
  auto op = SignedInOperator();
  ASSERT_FALSE(HasFailure());
  auto ada = Person("ada@example.test");
  auto kim = Person("kim@example.test");
  auto made = ada->PostJson("/api/v1/team", {{"name", "Lab One"}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string team_id = made.Json()["id"];
  Join(*ada, *kim, "kim@example.test");
  const std::vector<std::string> json_type = {"Content-Type: application/json"};
  const std::string card =
      json{{"brand", "visa"}, {"last4", "1881"}, {"exp_month", 12}, {"exp_year", 2099}}.dump();
  const std::string by_name = "/api/v1/admin/billing/teams/Lab%20One/card";
  const std::string by_id = "/api/v1/admin/billing/teams/" + team_id + "/card";

  // ada's card (Person records one) stays on her own account: the team starts without one.
  const json before = ada->Get("/api/v1/billing").Json()["payment_method"];
  ASSERT_TRUE(before.is_null());
  // Not the operator: 403; an unknown team or a name in another case: 404; a member's address:
  // 409. Nothing changed.
  ExpectProblem(ada->Send("PUT", by_name, card, json_type), 403, "forbidden");
  ExpectProblem(op->Send("PUT", "/api/v1/admin/billing/teams/lab%20one/card", card, json_type), 404,
                "team_not_found");
  ExpectProblem(op->Send("PUT", "/api/v1/admin/billing/teams/team_nope/card", card, json_type), 404,
                "team_not_found");
  ExpectProblem(op->Send("PUT", "/api/v1/admin/billing/kim%40example.test/card", card, json_type),
                409, "billing_managed_by_team");
  EXPECT_EQ(ada->Get("/api/v1/billing").Json()["payment_method"], before);

  auto set = op->Send("PUT", by_name, card, json_type);
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(set.Json()["billing_account"], team_id);
  EXPECT_EQ(ada->Get("/api/v1/billing").Json()["payment_method"]["last4"], "1881");
  EXPECT_EQ(kim->Get("/api/v1/me").Json()["billing"]["payment_method_on_file"], true);
  auto cleared = op->Delete(by_id);
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(cleared.Json()["removed"]["last4"], "1881");
  EXPECT_TRUE(ada->Get("/api/v1/billing").Json()["payment_method"].is_null());
  EXPECT_EQ(kim->Get("/api/v1/me").Json()["billing"]["payment_method_on_file"], false);
  auto again = op->Delete(by_id);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(again.Json()["removed"].is_null());
  ASSERT_EQ(op->Send("PUT", by_id, card, json_type).status, 200);

  auto audit = op->Get("/api/v1/admin/audit?target=" + team_id);
  ASSERT_EQ(audit.status, 200) << audit.body;
  int set_events = 0, clear_events = 0;
  const json events = audit.Json()["items"];
  for (const json& e : events) {
    if (e["action"] == "billing.set_card") ++set_events;
    if (e["action"] == "billing.clear_card") ++clear_events;
  }
  EXPECT_EQ(set_events, 2);
  EXPECT_EQ(clear_events, 1);
}

// Every team route, the audit log and the billing routes, for each kind of caller, through a
// browser's sign-in cookie and through an API token (every world's people have a card recorded by
// the operator; the owner's moved to the team when it was made). Each row runs in its own team
// ("world"), its calls in the order listed, so that a call that changes something (a member
// leaving, an outsider creating a team) comes after the calls it would change.
TEST_F(TeamsApiTest, PermissionMatrix) {
  enum class Who { kOwner, kMember, kRemoved, kOutsider, kOperator, kSignedOut };
  enum class Ep {
    kShow,
    kTeamUsage,
    kAudit,
    kInvite,
    kRevoke,
    kAccept,
    kRole,
    kRemove,
    kCreate,
    kLeave,
    kBilling,
    kInvoices,
    kUsage,
    kCardSetup,
    kCardRemove,
  };
  struct Cell {
    Ep ep;
    long status;
    const char* code;  ///< "" for a success
  };
  struct Row {
    Who who;
    const char* name;
    std::vector<Cell> cells;
  };
  const std::vector<Row> rows = {
      {Who::kOwner,
       "owner",
       {{Ep::kShow, 200, ""},
        {Ep::kTeamUsage, 200, ""},
        {Ep::kBilling, 200, ""},
        {Ep::kInvoices, 200, ""},
        {Ep::kUsage, 200, ""},
        {Ep::kCardSetup, 409, "manual_provider"},
        {Ep::kAudit, 403, "forbidden"},
        {Ep::kInvite, 201, ""},
        {Ep::kRevoke, 204, ""},
        {Ep::kAccept, 403, "invite_for_another_address"},
        {Ep::kRole, 200, ""},
        {Ep::kLeave, 409, "last_owner"},  // the target is still a member
        {Ep::kRemove, 204, ""},
        {Ep::kCreate, 409, "already_in_team"},
        {Ep::kCardRemove, 200, ""},
        {Ep::kLeave, 204, ""}}},  // its last member: the team closes
      {Who::kMember,
       "member",
       {{Ep::kShow, 200, ""},
        {Ep::kTeamUsage, 403, "owner_only"},
        {Ep::kBilling, 200, ""},
        {Ep::kInvoices, 200, ""},
        {Ep::kUsage, 200, ""},
        {Ep::kCardSetup, 403, "billing_managed_by_team"},
        {Ep::kCardRemove, 403, "billing_managed_by_team"},
        {Ep::kAudit, 403, "forbidden"},
        {Ep::kInvite, 403, "owner_only"},
        {Ep::kRevoke, 403, "owner_only"},
        {Ep::kAccept, 403, "invite_for_another_address"},
        {Ep::kRole, 403, "owner_only"},
        {Ep::kRemove, 403, "owner_only"},
        {Ep::kCreate, 409, "already_in_team"},
        {Ep::kLeave, 204, ""}}},
      {Who::kRemoved,
       "removed member",
       {{Ep::kShow, 404, "no_team"},
        {Ep::kTeamUsage, 404, "no_team"},
        {Ep::kBilling, 200, ""},
        {Ep::kInvoices, 200, ""},
        {Ep::kUsage, 200, ""},
        {Ep::kCardSetup, 409, "manual_provider"},
        {Ep::kCardRemove, 200, ""},
        {Ep::kAudit, 403, "forbidden"},
        {Ep::kInvite, 404, "no_team"},
        {Ep::kRevoke, 404, "no_team"},
        {Ep::kAccept, 403, "invite_for_another_address"},
        {Ep::kRole, 404, "no_team"},
        {Ep::kRemove, 404, "no_team"},
        {Ep::kLeave, 404, "no_team"},
        {Ep::kCreate, 201, ""}}},
      {Who::kOutsider,
       "outsider",
       {{Ep::kShow, 404, "no_team"},
        {Ep::kTeamUsage, 404, "no_team"},
        {Ep::kBilling, 200, ""},
        {Ep::kInvoices, 200, ""},
        {Ep::kUsage, 200, ""},
        {Ep::kCardSetup, 409, "manual_provider"},
        {Ep::kCardRemove, 200, ""},
        {Ep::kAudit, 403, "forbidden"},
        {Ep::kInvite, 404, "no_team"},
        {Ep::kRevoke, 404, "no_team"},
        {Ep::kAccept, 403, "invite_for_another_address"},
        {Ep::kRole, 404, "no_team"},
        {Ep::kRemove, 404, "no_team"},
        {Ep::kLeave, 404, "no_team"},
        {Ep::kCreate, 201, ""}}},
      // An operator has no power over other people's teams (docs/teams.md "Roles").
      {Who::kOperator,
       "operator",
       {{Ep::kShow, 404, "no_team"},
        {Ep::kTeamUsage, 404, "no_team"},
        {Ep::kBilling, 200, ""},
        {Ep::kInvoices, 200, ""},
        {Ep::kUsage, 200, ""},
        {Ep::kCardSetup, 409, "manual_provider"},
        {Ep::kCardRemove, 404, "not_found"},  // none recorded for this operator
        {Ep::kAudit, 200, ""},
        {Ep::kInvite, 404, "no_team"},
        {Ep::kRevoke, 404, "no_team"},
        {Ep::kAccept, 403, "invite_for_another_address"},
        {Ep::kRole, 404, "no_team"},
        {Ep::kRemove, 404, "no_team"},
        {Ep::kLeave, 404, "no_team"},
        {Ep::kCreate, 201, ""}}},
      {Who::kSignedOut,
       "signed out",
       {{Ep::kShow, 401, "unauthenticated"},
        {Ep::kTeamUsage, 401, "unauthenticated"},
        {Ep::kBilling, 401, "unauthenticated"},
        {Ep::kInvoices, 401, "unauthenticated"},
        {Ep::kUsage, 401, "unauthenticated"},
        {Ep::kCardSetup, 401, "unauthenticated"},
        {Ep::kCardRemove, 401, "unauthenticated"},
        {Ep::kAudit, 401, "unauthenticated"},
        {Ep::kInvite, 401, "unauthenticated"},
        {Ep::kRevoke, 401, "unauthenticated"},
        {Ep::kAccept, 401, "unauthenticated"},
        {Ep::kRole, 401, "unauthenticated"},
        {Ep::kRemove, 401, "unauthenticated"},
        {Ep::kLeave, 401, "unauthenticated"},
        {Ep::kCreate, 401, "unauthenticated"}}},
  };

  int world = 0;
  for (const Row& row : rows) {
    for (const bool by_token : {false, true}) {
      ++world;
      const std::string w = std::to_string(world);
      const std::string source = "127.0.1." + w;  // sign-ups are limited per address
      SCOPED_TRACE(std::string(row.name) + (by_token ? " with an API token" : " with a cookie"));
      // The world: a team with its owner, a member to act on, a pending invitation to revoke,
      // and an invitation for someone else to try to accept.
      auto owner = Person("owner" + w + "@m.test", source);
      ASSERT_EQ(owner->PostJson("/api/v1/team", {{"name", "Team " + w}}).status, 201);
      RecordTestCard("owner" + w + "@m.test");  // the team's own card
      auto target = Person("target" + w + "@m.test", source);
      Join(*owner, *target, "target" + w + "@m.test");
      const std::string target_id = PersonId(*target);
      (void)Invite(*owner, "pending" + w + "@m.test");
      const std::string pending_id = Team(*owner)["invites"][0]["id"];
      const std::string other_token = Invite(*owner, "other" + w + "@m.test");
      ASSERT_FALSE(other_token.empty());

      std::unique_ptr<HttpClient> actor;
      switch (row.who) {
        case Who::kOwner:
          actor = std::move(owner);
          break;
        case Who::kMember:
          actor = Person("member" + w + "@m.test", source);
          Join(*owner, *actor, "member" + w + "@m.test");
          break;
        case Who::kRemoved: {
          actor = Person("removed" + w + "@m.test", source);
          Join(*owner, *actor, "removed" + w + "@m.test");
          ASSERT_EQ(owner->Delete("/api/v1/team/members/" + PersonId(*actor)).status, 204);
          break;
        }
        case Who::kOutsider:
          actor = Person("outsider" + w + "@m.test", source);
          break;
        case Who::kOperator: {
          actor = SignedInOperator("op" + w + "@m.test");
          break;
        }
        case Who::kSignedOut:
          actor = Browser();
          break;
      }
      if (by_token) {
        if (row.who == Who::kSignedOut) {
          actor->SetBearer("gwt_notarealtoken");
        } else {
          actor = TokenClient(*actor);
        }
      }
      const std::vector<std::string> json_type = {"Content-Type: application/json"};
      for (const Cell& cell : row.cells) {
        HttpResult r;
        const char* what = "";
        switch (cell.ep) {
          case Ep::kShow:
            what = "GET /api/v1/team";
            r = actor->Get("/api/v1/team");
            break;
          case Ep::kTeamUsage:
            what = "GET /api/v1/team/usage";
            r = actor->Get("/api/v1/team/usage");
            if (r.status == 200) {
              EXPECT_TRUE(r.Json()["people"].is_array()) << r.body;
              EXPECT_TRUE(r.Json()["totals"].is_array()) << r.body;
              EXPECT_EQ(r.Json()["closed"], false) << r.body;
            }
            break;
          case Ep::kAudit:
            what = "GET /api/v1/admin/audit";
            r = actor->Get("/api/v1/admin/audit");
            break;
          case Ep::kInvite:
            what = "POST /api/v1/team/invites";
            r = actor->PostJson("/api/v1/team/invites", {{"email", "new" + w + "@m.test"}});
            break;
          case Ep::kRevoke:
            what = "DELETE /api/v1/team/invites/{id}";
            r = actor->Delete("/api/v1/team/invites/" + pending_id);
            break;
          case Ep::kAccept:
            what = "POST /api/v1/team/invites/accept";
            r = actor->PostJson("/api/v1/team/invites/accept", {{"token", other_token}});
            break;
          case Ep::kRole:
            what = "PUT /api/v1/team/members/{id}/role";
            r = actor->Send("PUT", "/api/v1/team/members/" + target_id + "/role",
                            R"({"role":"member"})", json_type);
            break;
          case Ep::kRemove:
            what = "DELETE /api/v1/team/members/{id}";
            r = actor->Delete("/api/v1/team/members/" + target_id);
            break;
          case Ep::kCreate:
            what = "POST /api/v1/team";
            r = actor->PostJson("/api/v1/team", {{"name", "Own " + w}});
            break;
          case Ep::kLeave:
            what = "POST /api/v1/team/leave";
            r = actor->Send("POST", "/api/v1/team/leave", "", {});
            break;
          case Ep::kBilling:
            what = "GET /api/v1/billing";
            r = actor->Get("/api/v1/billing");
            if (r.status == 200 && row.who == Who::kMember) {
              // The team's card is on file, but which card it is stays the owner's to know.
              const json method = r.Json()["payment_method"];
              EXPECT_TRUE(method.is_object()) << r.body;
              EXPECT_TRUE(method["last4"].is_null()) << r.body;
              EXPECT_TRUE(method["brand"].is_null()) << r.body;
              EXPECT_EQ(r.Json()["account"]["kind"], "team");
            } else if (r.status == 200 && row.who == Who::kOwner) {
              EXPECT_TRUE(r.Json()["payment_method"]["last4"].is_string()) << r.body;
              EXPECT_EQ(r.Json()["account"]["kind"], "team");
            }
            break;
          case Ep::kInvoices:
            what = "GET /api/v1/billing/invoices";
            r = actor->Get("/api/v1/billing/invoices");
            break;
          case Ep::kUsage:
            what = "GET /api/v1/usage/sessions";
            r = actor->Get("/api/v1/usage/sessions");
            break;
          case Ep::kCardSetup:
            what = "POST /api/v1/billing/card-setup";
            r = actor->Send("POST", "/api/v1/billing/card-setup", "", {});
            break;
          case Ep::kCardRemove:
            what = "DELETE /api/v1/billing/payment-method";
            r = actor->Delete("/api/v1/billing/payment-method");
            break;
        }
        SCOPED_TRACE(what);
        if (*cell.code != '\0') {
          ExpectProblem(r, cell.status, cell.code);
        } else {
          EXPECT_EQ(r.status, cell.status) << r.body;
        }
      }
    }
  }
}

TEST_F(TeamsApiTest, AdminAuditPagesAndFiltersByActorAndTarget) {
  auto op = SignedInOperator();
  ASSERT_FALSE(HasFailure());
  // No card: a card would move to the team with its own audit event in the same second as
  // team.create (billing.move_to_team), and the two would share a place in the order.
  auto ada = Browser();
  SignUp(*ada, "ada@example.test", "correct horse battery", Card::kNone);
  auto made = ada->PostJson("/api/v1/team", {{"name", "Lab"}});
  ASSERT_EQ(made.status, 201);
  const std::string team_id = made.Json()["id"];
  for (int i = 0; i < 16; ++i) {
    clock_.Advance(std::chrono::seconds(1));
    auto r = ada->PostJson("/api/v1/team/invites",
                           {{"email", "guest" + std::to_string(i) + "@example.test"}});
    ASSERT_EQ(r.status, 201) << r.body;
  }
  // 17 events on the team: team.create and 16 team.invite, newest first, 15 a page.
  auto page1 = op->Get("/api/v1/admin/audit?target=" + team_id);
  ASSERT_EQ(page1.status, 200) << page1.body;
  auto p1 = page1.Json();
  EXPECT_EQ(p1["total"], 17);
  EXPECT_EQ(p1["pages"], 2);
  EXPECT_EQ(p1["page"], 1);
  ASSERT_EQ(p1["items"].size(), 15u);
  EXPECT_EQ(p1["items"][0]["action"], "team.invite");
  EXPECT_EQ(p1["items"][0]["detail"]["email"], "guest15@example.test");
  EXPECT_EQ(p1["items"][0]["actor_email"], "ada@example.test");
  EXPECT_FALSE(p1["items"][0]["source_address"].get<std::string>().empty());
  auto p2 = op->Get("/api/v1/admin/audit?page=2&target=" + team_id).Json();
  ASSERT_EQ(p2["items"].size(), 2u);
  EXPECT_EQ(p2["items"][1]["action"], "team.create");
  std::set<std::string> ids;
  for (const auto& page : {p1, p2}) {
    for (const auto& e : page["items"]) ids.insert(e["id"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 17u);  // no event twice, none missing

  // By actor, as an email or a person id; and both filters at once.
  auto by_email = op->Get("/api/v1/admin/audit?actor=ADA@example.test").Json();
  auto by_id = op->Get("/api/v1/admin/audit?actor=" + PersonId(*ada)).Json();
  EXPECT_EQ(by_email["total"], by_id["total"]);
  EXPECT_GE(by_email["total"].get<int64_t>(), 17);
  for (const auto& e : by_email["items"]) EXPECT_EQ(e["actor_email"], "ada@example.test");
  auto both = op->Get("/api/v1/admin/audit?actor=" + PersonId(*op) + "&target=" + team_id).Json();
  EXPECT_EQ(both["total"], 0);
  auto nobody = op->Get("/api/v1/admin/audit?actor=nobody@example.test").Json();
  EXPECT_EQ(nobody["total"], 0);
  ExpectProblem(op->Get("/api/v1/admin/audit?page=0"), 400, "invalid_page");
  ExpectProblem(op->Get("/api/v1/admin/audit?actor=" + std::string(400, 'a')), 400,
                "invalid_query");
  ExpectProblem(ada->Get("/api/v1/admin/audit"), 403, "forbidden");
}

}  // namespace
}  // namespace gpuwerk::testing
