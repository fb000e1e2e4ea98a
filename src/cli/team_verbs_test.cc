// `gpuwerk team …` and `gpuwerk admin audit` against a fake API server: the requests they send,
// what they print, --json, and how they report the server's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "cli/commands.h"
#include "cli/fake_api_server.h"
#include "cli/login_file.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::cli {
namespace {

using nlohmann::json;

constexpr char kToken[] = "gwt_1secretpart";

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// An in-memory team as the server keeps it: the caller (ada) owns team "Lab" with member bob
/// and a pending invitation for carl.
class FakeTeamApi {
 public:
  FakeResponse Handle(const FakeRequest& req) {
    std::lock_guard lock(mu_);
    requests.push_back(req.method + " " + req.target);
    if (req.Header("authorization") != std::string("Bearer ") + kToken) {
      return FakeResponse::Problem(401, "unauthenticated", "Sign in first.");
    }
    const json body = req.Json();
    if (req.path == "/api/v1/team" && req.method == "GET") {
      if (!in_team) return FakeResponse::Problem(404, "no_team", "You are in no team.");
      return FakeResponse::Json(200, team);
    }
    if (req.path == "/api/v1/team" && req.method == "POST") {
      if (in_team) return FakeResponse::Problem(409, "already_in_team", "Leave it first.");
      in_team = true;
      team["name"] = body.value("name", "");
      return FakeResponse::Json(201, team);
    }
    if (req.path == "/api/v1/team/invites" && req.method == "POST") {
      const std::string email = body.value("email", "");
      if (email == "bob@example.com") {
        return FakeResponse::Problem(409, "already_member", "bob@example.com is a member.");
      }
      const bool resent = email == "carl@example.com";
      return FakeResponse::Json(resent ? 200 : 201, {{"id", "tin_9"},
                                                     {"email", email},
                                                     {"invited_by", "ada@example.com"},
                                                     {"created_at", "2026-01-01T00:00:00Z"},
                                                     {"sent_at", "2026-01-01T00:00:00Z"},
                                                     {"expires_at", "2026-01-08T00:00:00Z"},
                                                     {"resent", resent}});
    }
    if (req.path.starts_with("/api/v1/team/invites/") && req.method == "DELETE") {
      if (req.path != "/api/v1/team/invites/tin_1") {
        return FakeResponse::Problem(410, "invite_gone", "This invitation is no longer valid.");
      }
      team["invites"] = json::array();
      return FakeResponse::NoContent();
    }
    if (req.path == "/api/v1/team/members/per_bob" && req.method == "DELETE") {
      team["members"].erase(1);
      return FakeResponse::NoContent();
    }
    if (req.path == "/api/v1/team/members/per_ada" && req.method == "DELETE") {
      return FakeResponse::Problem(409, "last_owner",
                                   "The last owner cannot be removed; make another member an "
                                   "owner first.");
    }
    if (req.path == "/api/v1/team/members/per_bob/role" && req.method == "PUT") {
      team["members"][1]["role"] = body.value("role", "");
      return FakeResponse::Json(200, team["members"][1]);
    }
    if (req.path == "/api/v1/team/leave" && req.method == "POST") {
      in_team = false;
      return FakeResponse::NoContent();
    }
    if (req.path == "/api/v1/team/usage" && req.method == "GET") {
      return FakeResponse::Json(200, usage);
    }
    if (req.path == "/api/v1/admin/audit" && req.method == "GET") {
      json items = json::array();
      items.push_back({{"id", "aud_2"},
                       {"at", "2026-01-01T00:00:02Z"},
                       {"actor_id", "per_ada"},
                       {"actor_email", "ada@example.com"},
                       {"action", "team.invite"},
                       {"target", "team_1"},
                       {"source_address", "10.0.0.1"},
                       {"detail", {{"email", "carl@example.com"}}}});
      items.push_back({{"id", "aud_1"},
                       {"at", "2026-01-01T00:00:01Z"},
                       {"actor_id", ""},
                       {"actor_email", ""},
                       {"action", "instance.delete"},
                       {"target", "ins_1"},
                       {"source_address", "system"},
                       {"detail", json::object()}});
      return FakeResponse::Json(200, {{"items", items}, {"page", 1}, {"pages", 2}, {"total", 17}});
    }
    return FakeResponse::Problem(404, "not_found", "No such route.");
  }

  std::mutex mu_;
  std::vector<std::string> requests;
  bool in_team = true;
  json usage = {{"team_id", "team_1"},
                {"team_name", "Lab"},
                {"month", "2026-11"},
                {"closed", true},
                {"as_of", "2026-12-01T02:00:00Z"},
                {"people",
                 {{{"person_id", "per_ada"},
                   {"label", "ada@example.com"},
                   {"member", true},
                   {"minutes", 62},
                   {"amount_minor", 67},
                   {"currency", "usd"},
                   {"amount", "0.67 USD"}},
                  {{"person_id", "per_cy"},
                   {"label", "deleted account per_cy"},
                   {"member", false},
                   {"minutes", 1},
                   {"amount_minor", 1},
                   {"currency", "usd"},
                   {"amount", "0.01 USD"}}}},
                {"totals", {{{"currency", "usd"}, {"amount_minor", 68}, {"amount", "0.68 USD"}}}}};
  json team = {{"id", "team_1"},
               {"name", "Lab"},
               {"created_at", "2026-01-01T00:00:00Z"},
               {"my_role", "owner"},
               {"members",
                {{{"person_id", "per_ada"},
                  {"email", "ada@example.com"},
                  {"role", "owner"},
                  {"joined_at", "2026-01-01T00:00:00Z"}},
                 {{"person_id", "per_bob"},
                  {"email", "bob@example.com"},
                  {"role", "member"},
                  {"joined_at", "2026-01-02T00:00:00Z"}}}},
               {"invites",
                {{{"id", "tin_1"},
                  {"email", "carl@example.com"},
                  {"invited_by", "ada@example.com"},
                  {"created_at", "2026-01-01T00:00:00Z"},
                  {"sent_at", "2026-01-01T00:00:00Z"},
                  {"expires_at", "2026-01-08T00:00:00Z"}}}}};
};

class TeamVerbsTest : public ::testing::Test {
 protected:
  TeamVerbsTest() : server_([this](const FakeRequest& r) { return api_.Handle(r); }) {
    EXPECT_TRUE(WriteLoginFile(tmp_.path() / "login.json",
                               Login{server_.url(), kToken, "ada@example.com"}));
  }

  CliResult Run(std::vector<std::string> args, const std::string& stdin_text = "",
                bool terminal = false) {
    std::map<std::string, std::string> env = {{"GPUWERK_CONFIG_DIR", tmp_.path().string()}};
    std::istringstream in(stdin_text);
    std::ostringstream out, err;
    ClientIo io{.env = [env](std::string_view name) -> std::optional<std::string> {
                  auto it = env.find(std::string(name));
                  if (it == env.end()) return std::nullopt;
                  return it->second;
                },
                .in = &in,
                .out = &out,
                .err = &err,
                .in_is_terminal = terminal};
    CLI::App app("gpuwerk");
    app.require_subcommand(1);
    CliResult result;
    AddClientCommands(app, result.exit_code, std::move(io));
    const std::vector<std::string> typed = args;
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      ReportUsageError(app, e, typed, out, err);
      result.exit_code = 2;
    }
    result.out = out.str();
    result.err = err.str();
    return result;
  }

  testing::TempDir tmp_;
  FakeTeamApi api_;
  FakeApiServer server_;
};

TEST_F(TeamVerbsTest, ShowPrintsMembersAndInvitations) {
  CliResult r = Run({"team", "show"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Team Lab (team_1), you are owner.\n\n"
            "EMAIL            ROLE    JOINED                ID\n"
            "ada@example.com  owner   2026-01-01T00:00:00Z  per_ada\n"
            "bob@example.com  member  2026-01-02T00:00:00Z  per_bob\n\n"
            "Pending invitations:\n"
            "INVITED           BY               SENT                  EXPIRES               ID\n"
            "carl@example.com  ada@example.com  2026-01-01T00:00:00Z  2026-01-08T00:00:00Z  "
            "tin_1\n");
  CliResult j = Run({"team", "show", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out), api_.team);
}

TEST_F(TeamVerbsTest, UsagePrintsEachPersonAndTheTeamTotal) {
  CliResult r = Run({"team", "usage", "--month", "2026-11"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(api_.requests.back(), "GET /api/v1/team/usage?month=2026-11");
  EXPECT_EQ(r.out,
            "Team Lab, 2026-11 (invoiced):\n\n"
            "WHO                     MEMBER  MINUTES  AMOUNT    ID\n"
            "ada@example.com         yes     62       0.67 USD  per_ada\n"
            "deleted account per_cy  no      1        0.01 USD  per_cy\n\n"
            "Team total: 0.68 USD\n");
  CliResult j = Run({"team", "usage", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(api_.requests.back(), "GET /api/v1/team/usage");
  EXPECT_EQ(json::parse(j.out), api_.usage);
}

TEST_F(TeamVerbsTest, CreateAndTheServersRefusal) {
  api_.in_team = false;
  CliResult r = Run({"team", "create", "New Lab"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Created team New Lab; you are its owner. Invite people with 'gpuwerk team invite "
            "EMAIL'.\n");
  EXPECT_EQ(api_.requests.back(), "POST /api/v1/team");
  CliResult again = Run({"team", "create", "Other", "--json"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(json::parse(again.err)["code"], "already_in_team") << again.err;
}

TEST_F(TeamVerbsTest, InviteSaysWhetherItResent) {
  CliResult r = Run({"team", "invite", "dora@example.com"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Invited dora@example.com; it expires 2026-01-08T00:00:00Z.\n");
  CliResult resent = Run({"team", "invite", "carl@example.com"});
  ASSERT_EQ(resent.exit_code, 0) << resent.err;
  EXPECT_EQ(resent.out,
            "Sent a new invitation link to carl@example.com (the older link no longer works); it "
            "expires 2026-01-08T00:00:00Z.\n");
  CliResult member = Run({"team", "invite", "bob@example.com"});
  EXPECT_EQ(member.exit_code, 1);
  EXPECT_EQ(member.err, "gpuwerk: bob@example.com is a member. (already_member)\n");
  CliResult j = Run({"team", "invite", "dora@example.com", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out)["email"], "dora@example.com");
}

TEST_F(TeamVerbsTest, RevokeByIdOrAddress) {
  CliResult by_email = Run({"team", "revoke", "carl@example.com"});
  ASSERT_EQ(by_email.exit_code, 0) << by_email.err;
  EXPECT_EQ(by_email.out, "Revoked the invitation carl@example.com; its link no longer works.\n");
  EXPECT_EQ(api_.requests.back(), "DELETE /api/v1/team/invites/tin_1");
  CliResult unknown = Run({"team", "revoke", "zed@example.com"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err,
            "gpuwerk: no pending invitation for zed@example.com; see 'gpuwerk team show' "
            "(not_found)\n");
  CliResult gone = Run({"team", "revoke", "tin_7"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("(invite_gone)"), std::string::npos) << gone.err;
}

TEST_F(TeamVerbsTest, RemoveAndRoleNameMembersByEmailOrId) {
  CliResult role = Run({"team", "role", "BOB@example.com", "owner"});
  ASSERT_EQ(role.exit_code, 0) << role.err;
  EXPECT_EQ(role.out, "bob@example.com is now owner of Lab.\n");
  EXPECT_EQ(api_.requests.back(), "PUT /api/v1/team/members/per_bob/role");
  CliResult bad_role = Run({"team", "role", "bob@example.com", "admin"});
  EXPECT_EQ(bad_role.exit_code, 2);

  CliResult last = Run({"team", "remove", "per_ada", "--yes"});
  EXPECT_EQ(last.exit_code, 1);
  EXPECT_NE(last.err.find("make another member an owner first. (last_owner)"), std::string::npos)
      << last.err;
  CliResult removed = Run({"team", "remove", "bob@example.com", "-y"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(removed.out,
            "Removed bob@example.com from Lab; their instances billed to the team are being "
            "deleted.\n");
  CliResult nobody = Run({"team", "remove", "bob@example.com", "--yes", "--json"});
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_EQ(json::parse(nobody.err)["code"], "not_found");
}

// New-user trial: `team remove` deleted the member's instances without asking. On a terminal it
// asks (y/N); without one it refuses unless --yes; either way nothing is sent before a yes.
TEST_F(TeamVerbsTest, RemoveAsksFirstOrNeedsYes) {
  const size_t before = api_.requests.size();
  CliResult piped = Run({"team", "remove", "bob@example.com"});
  EXPECT_EQ(piped.exit_code, 1);
  EXPECT_NE(piped.err.find("pass --yes to confirm (confirmation_required)"), std::string::npos)
      << piped.err;
  CliResult piped_json = Run({"team", "remove", "bob@example.com", "--json"});
  EXPECT_EQ(json::parse(piped_json.err)["code"], "confirmation_required");
  CliResult declined = Run({"team", "remove", "bob@example.com"}, "n\n", /*terminal=*/true);
  EXPECT_EQ(declined.exit_code, 1);
  EXPECT_NE(declined.err.find("Remove bob@example.com from Lab? Their instances billed to the "
                              "team are deleted now. (y/N) "),
            std::string::npos)
      << declined.err;
  EXPECT_NE(declined.err.find("not removed: bob@example.com stays in Lab (cancelled)"),
            std::string::npos)
      << declined.err;
  CliResult no_answer = Run({"team", "remove", "bob@example.com"}, "", /*terminal=*/true);
  EXPECT_EQ(no_answer.exit_code, 1);
  for (size_t i = before; i < api_.requests.size(); ++i) {
    EXPECT_FALSE(api_.requests[i].starts_with("DELETE")) << api_.requests[i];
  }
  CliResult agreed = Run({"team", "remove", "bob@example.com"}, "y\n", /*terminal=*/true);
  ASSERT_EQ(agreed.exit_code, 0) << agreed.err;
  EXPECT_EQ(api_.requests.back(), "DELETE /api/v1/team/members/per_bob");
}

TEST_F(TeamVerbsTest, Leave) {
  CliResult r = Run({"team", "leave"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(api_.requests.back(), "POST /api/v1/team/leave");
  CliResult show = Run({"team", "show"});
  EXPECT_EQ(show.exit_code, 1);
  EXPECT_EQ(show.err, "gpuwerk: You are in no team. (no_team)\n");
}

TEST_F(TeamVerbsTest, AdminAuditFiltersAndPrintsAPage) {
  CliResult r = Run({"admin", "audit", "--actor", "ada@example.com", "--target", "team_1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(api_.requests.back(),
            "GET /api/v1/admin/audit?page=1&actor=ada%40example.com&target=team_1");
  EXPECT_EQ(r.out,
            "AT                    ACTOR            ACTION           TARGET  FROM\n"
            "2026-01-01T00:00:02Z  ada@example.com  team.invite      team_1  10.0.0.1\n"
            "2026-01-01T00:00:01Z  (system)         instance.delete  ins_1   system\n"
            "Page 1 of 2, 17 audit events, newest first; next: --page 2.\n");
  CliResult j = Run({"admin", "audit", "--page", "2", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(api_.requests.back(), "GET /api/v1/admin/audit?page=2");
  EXPECT_EQ(json::parse(j.out)["total"], 17);
  CliResult bad = Run({"admin", "audit", "--page", "0"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("(invalid_page)"), std::string::npos);
}

}  // namespace
}  // namespace gpuwerk::cli
