#include "cli/commands.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "cli/fake_api_server.h"
#include "cli/internal/verb_support.h"
#include "cli/login_file.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::cli {
namespace {

/// What a verb prints first when --token is on its command line.
constexpr const char* kTokenWarning =
    "gpuwerk: warning: --token on the command line can be read by other users of this machine "
    "(ps, /proc); set GPUWERK_TOKEN instead, or run `gpuwerk login` once to keep the token in "
    "the credentials file";

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kPublicKey[] =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl ada@host\n";

/// A small in-memory stand-in for the server's accounts, tokens and SSH keys endpoints.
class FakeApi {
 public:
  /// The session cookie's name a sign-in sets (a server with an https public URL uses the
  /// `__Host-` one).
  std::string session_cookie = "gpuwerk_session";

  FakeResponse Handle(const FakeRequest& req) {
    std::lock_guard lock(mu_);
    const std::string bearer = req.Header("authorization");
    const bool signed_in = req.Header("cookie") == "gpuwerk_session=sess1" ||
                           req.Header("cookie") == session_cookie + "=sess1";
    const bool token_ok =
        bearer.starts_with("Bearer ") && tokens_.contains(bearer.substr(sizeof("Bearer ") - 1));
    const json body = req.Json();

    if (req.method == "POST" && req.path == "/api/v1/auth/login") {
      if (body.value("password", "") != "hunter2") {
        return FakeResponse::Problem(401, "invalid_credentials", "Wrong email or password.");
      }
      FakeResponse r = FakeResponse::Json(200, {{"person", {{"email", "ada@example.com"}}}});
      r.headers.emplace_back("Set-Cookie", session_cookie + "=sess1; Path=/; HttpOnly");
      return r;
    }
    if (req.method == "POST" && req.path == "/api/v1/auth/signup") {
      if (body.value("password", "").size() < 8) {
        return FakeResponse::Problem(400, "weak_password", "Use at least 8 characters.");
      }
      // As the server: the same 202 for every address, no sign-in session.
      return FakeResponse::Json(202, {{"status", "accepted"}, {"message", "Check your mail."}});
    }
    if (req.method == "POST" && req.path == "/api/v1/auth/logout") {
      ++logouts;
      return FakeResponse::NoContent();
    }
    if (!signed_in && !token_ok) {
      return FakeResponse::Problem(401, "unauthenticated", "Sign in first.");
    }
    if (req.method == "GET" && req.path == "/api/v1/usage/sessions") {
      // Page 2 of 3 (keyset cursors; docs/billing.md "Usage history").
      return FakeResponse::Json(200, {{"items",
                                       {{{"billing_session_id", "bil_a"},
                                         {"name", "alpha"},
                                         {"instance_id", "ins_a"},
                                         {"gpu_type", "spark-1x"},
                                         {"started_at", "2026-11-10T10:00:00Z"},
                                         {"ended_at", nullptr},
                                         {"active", true},
                                         {"duration_seconds", 3660},
                                         {"minutes", 61},
                                         {"amount_minor", 66},
                                         {"currency", "usd"},
                                         {"amount", "0.66 USD"}}}},
                                      {"page", 2},
                                      {"pages", 3},
                                      {"total", 31},
                                      {"next", "100.bil_a"},
                                      {"prev", "200.bil_b"}});
    }
    if (req.method == "POST" && req.path == "/api/v1/admin/invoices/close") {
      // Under a provider that collects invoices: one pushed, one failed (docs/billing.md
      // "Collecting invoices"); a month of 2025 under the manual provider: no push.
      json push = nullptr;
      if (body.value("month", "") == "2026-11") {
        push = {
            {"provider", "stripe"},
            {"pushed",
             {{{"invoice", "inv_1"}, {"billing_account", "solo_per_1"}, {"provider_ref", "in_1"}}}},
            {"failed",
             {{{"invoice", "inv_2"},
               {"billing_account", "team_2"},
               {"code", "no_customer"},
               {"message", "no\u001b[31m customer"},
               {"next_attempt_at", "2026-12-01T01:01:00Z"}}}},
            {"pushed_before", 3}};
      }
      return FakeResponse::Json(200, {{"month", body.value("month", "")},
                                      {"invoices_created", 2},
                                      {"lines_created", 2},
                                      {"invoices", 5},
                                      {"already_closed", false},
                                      {"push", push}});
    }
    if (req.method == "GET" && req.path == "/api/v1/admin/invoices/export") {
      if (req.target.ends_with("month=2027-01")) {  // never closed: the header only
        return {200, "invoice_id,instance_name\r\n", {{"Content-Type", "text/csv"}}};
      }
      return {200, "invoice_id,instance_name\r\ninv_1,'=x\r\n", {{"Content-Type", "text/csv"}}};
    }
    if (req.method == "GET" && req.path == "/api/v1/me") {
      return FakeResponse::Json(
          200,
          {{"email", "ada@example.com"},
           {"is_operator", false},
           {"team", nullptr},
           {"role", nullptr},
           {"billing",
            {{"account", {{"id", "solo_per_1"}, {"kind", "solo"}, {"name", "ada@example.com"}}},
             {"provider", "manual"},
             {"payment_method_on_file", false}}}});
    }
    if (req.method == "POST" && req.path == "/api/v1/tokens") {
      const std::string secret = "gwt_" + std::to_string(next_id_) + "secretpart";
      json t = {{"id", "tok_" + std::to_string(next_id_++)},
                {"name", body.value("name", "")},
                {"prefix", secret.substr(0, 10)},
                {"created_at", "2026-01-01T00:00:00Z"},
                {"last_used_at", nullptr}};
      tokens_[secret] = t;
      t["token"] = secret;
      return FakeResponse::Json(201, t);
    }
    if (req.method == "GET" && req.path == "/api/v1/tokens") {
      json items = json::array();
      for (const auto& [secret, t] : tokens_) items.push_back(t);
      return FakeResponse::Json(
          200, {{"items", items}, {"page", 1}, {"pages", 1}, {"total", items.size()}});
    }
    if (req.method == "DELETE" && req.path.starts_with("/api/v1/tokens/")) {
      const std::string id = req.path.substr(sizeof("/api/v1/tokens/") - 1);
      for (auto it = tokens_.begin(); it != tokens_.end(); ++it) {
        if (it->second["id"] == id) {
          tokens_.erase(it);
          return FakeResponse::NoContent();
        }
      }
      return FakeResponse::Problem(404, "not_found", "API token not found.");
    }
    if (req.method == "GET" && req.path == "/api/v1/ssh-keys") {
      // Two keys a page, to make the client follow pages.
      const int page = req.query.empty() ? 1 : std::stoi(req.query.substr(5));
      json items = json::array();
      for (size_t i = (page - 1) * 2; i < keys_.size() && i < static_cast<size_t>(page) * 2; ++i) {
        items.push_back(keys_[i]);
      }
      const int pages = std::max<int>(1, static_cast<int>((keys_.size() + 1) / 2));
      return FakeResponse::Json(
          200, {{"items", items}, {"page", page}, {"pages", pages}, {"total", keys_.size()}});
    }
    if (req.method == "POST" && req.path == "/api/v1/ssh-keys") {
      for (const auto& k : keys_) {
        if (k["name"] == body.value("name", "")) {
          return FakeResponse::Problem(409, "name_taken", "You already have a key named so.");
        }
      }
      json k = {{"id", "key_" + std::to_string(next_id_++)},
                {"name", body.value("name", "")},
                {"type", "ssh-ed25519"},
                {"fingerprint", "SHA256:fp" + std::to_string(keys_.size())},
                {"public_key", body.value("public_key", "")},
                {"created_at", "2026-01-02T03:04:05Z"}};
      keys_.push_back(k);
      return FakeResponse::Json(201, k);
    }
    if (req.method == "DELETE" && req.path.starts_with("/api/v1/ssh-keys/")) {
      const std::string id = req.path.substr(sizeof("/api/v1/ssh-keys/") - 1);
      for (auto it = keys_.begin(); it != keys_.end(); ++it) {
        if ((*it)["id"] == id) {
          keys_.erase(it);
          return FakeResponse::NoContent();
        }
      }
      return FakeResponse::Problem(404, "not_found", "SSH key not found.");
    }
    // Billing under the manual provider (docs/billing.md "API and CLI").
    if (req.method == "GET" && req.path == "/api/v1/billing") {
      return FakeResponse::Json(
          200,
          {{"account",
            {{"id", "solo_per_1"},
             {"kind", "solo"},
             {"name", "ada@example.com"},
             {"may_manage", true}}},
           {"provider", "manual"},
           {"payment_method", nullptr},
           {"how_to_add", "Ask your operator to record one."},
           {"current_month",
            {{"month", "2026-12"},
             {"totals", {{{"currency", "usd"}, {"amount_minor", 1234}, {"amount", "12.34 USD"}}}},
             {"as_of", "2026-12-03T06:00:00Z"}}}});
    }
    if (req.method == "POST" && req.path == "/api/v1/billing/card-setup") {
      return FakeResponse::Problem(409, "manual_provider", "Ask your operator to record one.");
    }
    if (req.method == "PUT" && req.path.starts_with("/api/v1/admin/billing/")) {
      const json card = req.Json();
      return FakeResponse::Json(200,
                                {{"email", "bob+1@example.com"},
                                 {"billing_account", "solo_per_2"},
                                 {"payment_method",
                                  {{"brand", card["brand"]},
                                   {"last4", card["last4"]},
                                   {"description",
                                    "visa ending 4242, expires 12/2030 (manual: recorded by the "
                                    "operator)"}}}});
    }
    if (req.method == "POST" && req.path == "/api/v1/instances") {
      if (launch_.empty()) return FakeResponse::Problem(500, "internal", "no launch scripted");
      return FakeResponse::Json(201, launch_.front());
    }
    if (req.method == "GET" && req.path == "/api/v1/instances") {
      json items = json::array();
      if (!launch_.empty()) items.push_back(launch_.front());
      return FakeResponse::Json(200, {{"items", items}, {"page", 1}, {"pages", 1}, {"total", 1}});
    }
    if (req.method == "DELETE" && req.path == "/api/v1/instances/ins_1") {
      if (launch_.empty()) return FakeResponse::Problem(404, "not_found", "No such instance.");
      launch_.front()["status"] = "deleting";
      ++instance_deletes_;
      return FakeResponse::NoContent();
    }
    if (req.method == "POST" && req.path == "/api/v1/instances/ins_1/restart") {
      return FakeResponse::Json(202, launch_.front());
    }
    if (req.method == "GET" && req.path == "/api/v1/instances/ins_1") {
      // Each look moves the launch on by one scripted state; the last one stays.
      if (launch_.size() > 1) launch_.erase(launch_.begin());
      return FakeResponse::Json(200, launch_.front());
    }
    return FakeResponse::Problem(404, "not_found", "No such route.");
  }

  /// How many DELETE /api/v1/instances/ins_1 were answered 204.
  int instance_deletes() {
    std::lock_guard lock(mu_);
    return instance_deletes_;
  }
  /// The states instance "web" (ins_1) goes through: the create's answer first, then one per
  /// GET /api/v1/instances/ins_1.
  void ScriptLaunch(std::vector<json> states) {
    std::lock_guard lock(mu_);
    launch_ = std::move(states);
  }

  void AddKey(const std::string& name) {
    std::lock_guard lock(mu_);
    keys_.push_back({{"id", "key_" + std::to_string(next_id_++)},
                     {"name", name},
                     {"type", "ssh-ed25519"},
                     {"fingerprint", "SHA256:" + name},
                     {"created_at", "2026-01-02T03:04:05Z"}});
  }
  std::string AddToken(const std::string& name) {
    std::lock_guard lock(mu_);
    const std::string secret = "gwt_" + std::to_string(next_id_) + "secretpart";
    tokens_[secret] = {{"id", "tok_" + std::to_string(next_id_++)},
                       {"name", name},
                       {"prefix", secret.substr(0, 10)},
                       {"created_at", "2026-01-01T00:00:00Z"},
                       {"last_used_at", nullptr}};
    return secret;
  }
  size_t token_count() {
    std::lock_guard lock(mu_);
    return tokens_.size();
  }
  size_t key_count() {
    std::lock_guard lock(mu_);
    return keys_.size();
  }

  int logouts = 0;

 private:
  std::mutex mu_;
  std::map<std::string, json> tokens_;  // by secret
  std::vector<json> keys_;
  std::vector<json> launch_;
  int instance_deletes_ = 0;
  int next_id_ = 1;
};

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CommandsTest : public ::testing::Test {
 protected:
  CommandsTest() : server_([this](const FakeRequest& r) { return api_.Handle(r); }) {}

  /// Runs `gpuwerk <args>` with GPUWERK_CONFIG_DIR in a temp dir plus `env`.
  CliResult Run(std::vector<std::string> args, std::string stdin_text = "",
                std::map<std::string, std::string> env = {}) {
    env["GPUWERK_CONFIG_DIR"] = tmp_.path().string();
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
                .in_is_terminal = false,
                .sleep = [this](std::chrono::milliseconds d) { now_ += d; },
                .now = [this] { return now_; }};
    CLI::App app("gpuwerk");
    app.require_subcommand(1);
    CliResult result;
    AddClientCommands(app, result.exit_code, std::move(io));
    const std::vector<std::string> typed = args;
    std::reverse(args.begin(), args.end());
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      // As main does: the usage error, then exit code 2.
      ReportUsageError(app, e, typed, out, err);
      result.exit_code = 2;
    }
    result.out = out.str();
    result.err = err.str();
    return result;
  }

  /// Saves a login for the fake server with a token it knows.
  std::string LogIn() {
    const std::string token = api_.AddToken("saved");
    EXPECT_TRUE(WriteLoginFile(login_path(), Login{server_.url(), token, "ada@example.com"}));
    return token;
  }

  fs::path login_path() const { return tmp_.path() / "login.json"; }

  /// The login file holds a new API token for the fake server, for `email`.
  void ExpectSavedLogin(const std::string& email) {
    auto saved = ReadLoginFile(login_path());
    ASSERT_TRUE(saved && *saved);
    EXPECT_EQ((*saved)->url, server_.url());
    EXPECT_EQ((*saved)->email, email);
    EXPECT_TRUE((*saved)->token.starts_with("gwt_"));
  }

  /// The time `--wait` reads; its sleeps only move it on.
  std::chrono::steady_clock::time_point now_{};
  testing::TempDir tmp_;
  FakeApi api_;
  FakeApiServer server_;
};

TEST_F(CommandsTest, LoginSendsBackTheHostPrefixedCookieOfAnHttpsServer) {
  api_.session_cookie = "__Host-gpuwerk_session";
  CliResult r =
      Run({"login", "--url", server_.url(), "--email", "ada@example.com", "--password-stdin"},
          "hunter2\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].path, "/api/v1/tokens");
  EXPECT_EQ(reqs[1].Header("cookie"), "__Host-gpuwerk_session=sess1");
  EXPECT_EQ(reqs[2].Header("cookie"), "__Host-gpuwerk_session=sess1");
  ExpectSavedLogin("ada@example.com");
}

TEST_F(CommandsTest, LoginWithPasswordCreatesATokenSavesItAndEndsTheSignInSession) {
  CliResult r =
      Run({"login", "--url", server_.url() + "/", "--email", "ada@example.com", "--password-stdin"},
          "hunter2\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Logged in to " + server_.url() + " as ada@example.com.\n");
  EXPECT_EQ(r.err, "");

  ExpectSavedLogin("ada@example.com");
  EXPECT_EQ(api_.logouts, 1);

  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].path, "/api/v1/auth/login");
  EXPECT_EQ(reqs[0].Json(), json({{"email", "ada@example.com"}, {"password", "hunter2"}}));
  EXPECT_EQ(reqs[1].path, "/api/v1/tokens");
  EXPECT_EQ(reqs[1].Header("cookie"), "gpuwerk_session=sess1");
  EXPECT_EQ(reqs[1].Header("origin"), "");
  EXPECT_TRUE(reqs[1].Json()["name"].get<std::string>().starts_with("cli "));
  EXPECT_EQ(reqs[2].path, "/api/v1/auth/logout");
  EXPECT_EQ(reqs[2].Header("cookie"), "gpuwerk_session=sess1");

  // The saved login works for the other verbs.
  CliResult who = Run({"whoami"});
  ASSERT_EQ(who.exit_code, 0) << who.err;
  EXPECT_NE(who.out.find("ada@example.com"), std::string::npos);
}

// `billing` alone shows the state (or what to do), `billing add-card` under the manual
// provider fails with the server's reason, `admin billing set-card` sends the card as the API
// takes it (the email escaped in the path), a malformed --exp sends nothing.
TEST_F(CommandsTest, BillingVerbsShowAddAndSetCards) {
  LogIn();
  CliResult who = Run({"whoami"});
  ASSERT_EQ(who.exit_code, 0) << who.err;
  EXPECT_NE(who.out.find("solo (ada@example.com), no payment method on file"), std::string::npos)
      << who.out;
  CliResult shown = Run({"billing"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("Account:   solo (ada@example.com)"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("Card:      none. Ask your operator to record one."), std::string::npos)
      << shown.out;
  EXPECT_NE(shown.out.find("Month:     2026-12 so far: 12.34 USD (as of 2026-12-03T06:00:00Z)"),
            std::string::npos)
      << shown.out;
  CliResult as_json = Run({"billing", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_EQ(json::parse(as_json.out)["provider"], "manual");
  EXPECT_EQ(json::parse(as_json.out)["current_month"]["totals"][0]["amount_minor"], 1234);
  CliResult add = Run({"billing", "add-card"});
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_EQ(add.err, "gpuwerk: Ask your operator to record one. (manual_provider)\n");
  EXPECT_EQ(add.out, "");

  const size_t before = server_.requests().size();
  CliResult bad = Run({"admin", "billing", "set-card", "bob+1@example.com", "--brand", "visa",
                       "--last4", "4242", "--exp", "2030-12"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("(invalid_exp)"), std::string::npos) << bad.err;
  EXPECT_EQ(server_.requests().size(), before);
  CliResult set = Run({"admin", "billing", "set-card", "bob+1@example.com", "--brand", "visa",
                       "--last4", "4242", "--exp", "12/2030"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("Recorded visa ending 4242"), std::string::npos) << set.out;
  const FakeRequest put = server_.requests().back();
  EXPECT_EQ(put.method, "PUT");
  EXPECT_EQ(put.path, "/api/v1/admin/billing/bob%2B1%40example.com/card");
  EXPECT_EQ(put.Json(),
            json({{"brand", "visa"}, {"last4", "4242"}, {"exp_month", 12}, {"exp_year", 2030}}));
  // A team is named by its id or exact name (no '@'): the team route.
  CliResult team = Run({"admin", "billing", "set-card", "Lab One", "--brand", "visa", "--last4",
                        "4242", "--exp", "12/2030"});
  ASSERT_EQ(team.exit_code, 0) << team.err;
  EXPECT_EQ(server_.requests().back().path, "/api/v1/admin/billing/teams/Lab%20One/card");
}

// As the dashboard does, removing the card asks first: without a terminal only --yes goes on,
// and nothing is sent before.
TEST_F(CommandsTest, BillingRemoveCardAsksFirst) {
  LogIn();
  const size_t before = server_.requests().size();
  CliResult r = Run({"billing", "remove-card"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("pass --yes to confirm"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.ends_with("(confirmation_required)\n")) << r.err;
  EXPECT_EQ(server_.requests().size(), before);
}

TEST_F(CommandsTest, LoginWithAWrongPasswordPrintsTheServersReason) {
  CliResult r =
      Run({"login", "--url", server_.url(), "--email", "ada@example.com", "--password-stdin"},
          "nope\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "gpuwerk: Wrong email or password. (invalid_credentials)\n");
  EXPECT_FALSE(fs::exists(login_path()));
}

TEST_F(CommandsTest, LoginWithoutATerminalAsksForPasswordStdin) {
  CliResult r = Run({"login", "--url", server_.url(), "--email", "ada@example.com"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--password-stdin"), std::string::npos) << r.err;
  EXPECT_TRUE(server_.requests().empty());
}

TEST_F(CommandsTest, LoginWithTokenValidatesAndSavesIt) {
  const std::string token = api_.AddToken("mine");
  CliResult r = Run({"login", "--token", token}, "", {{"GPUWERK_URL", server_.url()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Logged in to " + server_.url() + " as ada@example.com.\n");
  EXPECT_EQ(**ReadLoginFile(login_path()), (Login{server_.url(), token, "ada@example.com"}));

  CliResult bad = Run({"login", "--url", server_.url(), "--token", "gwt_wrong"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, std::string(kTokenWarning) + "\ngpuwerk: the server at " + server_.url() +
                         " does not accept this API token (unauthenticated)\n");
}

// New-user trial: a token on argv is readable by anyone on the machine (/proc/PID/cmdline). It
// still works, with a warning on stderr that names the safer ways; not under --json, whose stderr
// is one problem line.
TEST_F(CommandsTest, ATokenOnTheCommandLineWorksWithAWarning) {
  LogIn();
  const std::string token = api_.AddToken("ci");
  CliResult r = Run({"keys", "ls", "--token", token});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, std::string(kTokenWarning) + "\n");
  EXPECT_NE(r.err.find("GPUWERK_TOKEN"), std::string::npos);
  CliResult quiet = Run({"keys", "ls", "--token", token, "--json"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  CliResult from_env = Run({"keys", "ls"}, "", {{"GPUWERK_TOKEN", token}});
  ASSERT_EQ(from_env.exit_code, 0) << from_env.err;
  EXPECT_EQ(from_env.err, "");
}

TEST_F(CommandsTest, LogoutDeletesTheTokenAndTheFile) {
  LogIn();
  api_.AddToken("other");
  CliResult r = Run({"logout"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Logged out of " + server_.url() + ".\n");
  EXPECT_FALSE(fs::exists(login_path()));
  EXPECT_EQ(api_.token_count(), 1u);

  CliResult again = Run({"logout"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.out, "Not logged in.\n");
}

TEST_F(CommandsTest, VerbsWithoutALoginSayHowToLogIn) {
  CliResult r = Run({"keys", "ls"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "gpuwerk: not logged in: run 'gpuwerk login' or set GPUWERK_URL and GPUWERK_TOKEN "
            "(not_logged_in)\n");
}

TEST_F(CommandsTest, KeysLsFollowsPagesAndPrintsATable) {
  LogIn();
  for (const char* name : {"laptop", "desktop", "ci"}) api_.AddKey(name);
  CliResult r = Run({"keys", "ls"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "NAME     TYPE         FINGERPRINT     CREATED\n"
            "laptop   ssh-ed25519  SHA256:laptop   2026-01-02T03:04:05Z\n"
            "desktop  ssh-ed25519  SHA256:desktop  2026-01-02T03:04:05Z\n"
            "ci       ssh-ed25519  SHA256:ci       2026-01-02T03:04:05Z\n");

  CliResult j = Run({"keys", "ls", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  json keys = json::parse(j.out);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[2]["name"], "ci");
}

TEST_F(CommandsTest, KeysAddFromAFileAndFromStdin) {
  LogIn();
  const fs::path pub = tmp_.path() / "id_ed25519.pub";
  std::ofstream(pub) << kPublicKey;
  CliResult r = Run({"keys", "add", "laptop", pub.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Added key laptop (SHA256:fp0).\n");

  CliResult s = Run({"keys", "add", "desktop", "--json"}, kPublicKey);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  json key = json::parse(s.out);
  EXPECT_EQ(key["name"], "desktop");
  EXPECT_EQ(key["public_key"], kPublicKey);

  CliResult taken = Run({"keys", "add", "laptop", "-"}, kPublicKey);
  EXPECT_EQ(taken.exit_code, 1);
  EXPECT_EQ(taken.err, "gpuwerk: You already have a key named so. (name_taken)\n");
}

TEST_F(CommandsTest, KeysAddRefusesAPrivateKeyWithoutSendingOrPrintingIt) {
  LogIn();
  const fs::path priv = tmp_.path() / "id_ed25519";
  const std::string secret_body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQSECRET";
  std::ofstream(priv) << "-----BEGIN OPENSSH PRIVATE KEY-----\n"
                      << secret_body << "\n-----END OPENSSH PRIVATE KEY-----\n";
  std::ofstream(priv.string() + ".pub") << kPublicKey;
  const size_t before = server_.requests().size();

  CliResult r = Run({"keys", "add", "laptop", priv.string()});
  EXPECT_EQ(r.exit_code, 1);
  // New-user trial: refused before sending, the key is not exposed; the message says it was not
  // sent and names the .pub file to pass instead (the server's message says "treat it as exposed").
  EXPECT_TRUE(r.err.starts_with("gpuwerk: This is a PRIVATE key. Nothing was sent")) << r.err;
  EXPECT_NE(r.err.find("the matching .pub file instead (" + priv.string() + ".pub)."),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(
      r.err.ends_with("Nothing was sent: the key did not leave this machine. Pass the "
                      "matching .pub file instead (" +
                      priv.string() + ".pub). (private_key_pasted)\n"))
      << r.err;
  EXPECT_EQ(r.err.find("exposed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(secret_body), std::string::npos);
  EXPECT_EQ(r.out, "");

  CliResult piped =
      Run({"keys", "add", "laptop"}, "-----BEGIN RSA PRIVATE KEY-----\nMIIE" + secret_body + "\n");
  EXPECT_EQ(piped.exit_code, 1);
  EXPECT_EQ(piped.err,
            "gpuwerk: This is a PRIVATE key. Nothing was sent: the key did not leave this "
            "machine. Paste the contents of the matching .pub file instead, e.g. "
            "~/.ssh/id_ed25519.pub. (private_key_pasted)\n");
  EXPECT_EQ(server_.requests().size(), before);
  EXPECT_EQ(api_.key_count(), 0u);
}

// New-user trial: `keys add ~/.ssh/id_ed25519.pub` (NAME forgotten) took the path as the name,
// asked for a key on standard input and then failed with invalid_name.
TEST_F(CommandsTest, KeysAddSaysAForgottenNameBeforeAskingForAKey) {
  LogIn();
  const fs::path pub = tmp_.path() / "id_ed25519.pub";
  std::ofstream(pub) << kPublicKey;
  const size_t before = server_.requests().size();
  CliResult r = Run({"keys", "add", pub.string()}, kPublicKey);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "gpuwerk: '" + pub.string() +
                       "' is a file, not a key name: give the key a name first, `gpuwerk keys "
                       "add NAME FILE`, e.g. `gpuwerk keys add laptop " +
                       pub.string() + "` (invalid_name)\n");
  EXPECT_EQ(server_.requests().size(), before);
  EXPECT_EQ(api_.key_count(), 0u);
  // A name that is no file is still a name.
  CliResult named = Run({"keys", "add", "id_ed25519.pub"}, kPublicKey);
  EXPECT_EQ(named.exit_code, 0) << named.err;
}

TEST_F(CommandsTest, KeysAddReportsAMissingFile) {
  LogIn();
  CliResult r = Run({"keys", "add", "laptop", (tmp_.path() / "nope.pub").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("No such file or directory (file_unreadable)"), std::string::npos) << r.err;
}

TEST_F(CommandsTest, KeysRmResolvesTheName) {
  LogIn();
  for (const char* name : {"a", "b", "laptop"}) api_.AddKey(name);
  CliResult r = Run({"keys", "rm", "laptop"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Removed key laptop.\n");
  EXPECT_EQ(api_.key_count(), 2u);

  CliResult unknown = Run({"keys", "rm", "laptop"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "gpuwerk: no key named laptop; see 'gpuwerk keys ls' (not_found)\n");
}

TEST_F(CommandsTest, TokensCreateShowsTheSecretOnceOnStdout) {
  LogIn();
  CliResult r = Run({"tokens", "create", "ci"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("gwt_")) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1);
  EXPECT_NE(r.err.find("only time"), std::string::npos) << r.err;

  CliResult ls = Run({"tokens", "ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_TRUE(ls.out.starts_with("ID     NAME   PREFIX      CREATED               LAST USED\n"))
      << ls.out;
  EXPECT_NE(ls.out.find("saved  gwt_1secre  2026-01-01T00:00:00Z  -          (this CLI)\n"),
            std::string::npos)
      << ls.out;
  EXPECT_EQ(ls.out.find("secretpart"), std::string::npos);  // secrets are never listed
}

TEST_F(CommandsTest, TokensRmDeletesById) {
  LogIn();
  api_.AddToken("ci");
  CliResult r = Run({"tokens", "rm", "tok_2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Deleted API token ci.\n");
  EXPECT_EQ(api_.token_count(), 1u);

  CliResult unknown = Run({"tokens", "rm", "tok_9"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("(not_found)"), std::string::npos);
}

TEST_F(CommandsTest, FlagsOverrideTheLoginFile) {
  LogIn();
  CliResult r = Run({"whoami", "--token", "gwt_bogus"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("refused the API token"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.ends_with("(unauthenticated)\n"));
}

TEST_F(CommandsTest, UnreachableServerIsOneLine) {
  LogIn();
  CliResult r = Run({"keys", "ls", "--url", "http://127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.err.starts_with("gpuwerk: cannot reach the gpuwerk server at http://127.0.0.1:1: "))
      << r.err;
  EXPECT_TRUE(r.err.ends_with("(server_unreachable)\n"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

// The server's messages name its fields; the CLI says the flags the person typed instead.
TEST(InFlagWordsTest, NamesTheFlagsTyped) {
  core::Error e(core::ErrorCode::kInvalidArgument, "invalid_field",
                "exp_month must be 1 to 12; exp_year from 2000; my_exp_month stays");
  EXPECT_EQ(internal::InFlagWords(e, {{"exp_month", "--exp"}, {"exp_year", "--exp"}}).message,
            "--exp must be 1 to 12; --exp from 2000; my_exp_month stays");
  core::Error p(core::ErrorCode::kInvalidArgument, "invalid_price",
                "price_minor_per_hour must be at least 0");
  const core::Error renamed = internal::InFlagWords(p, {{"price_minor_per_hour", "--price-minor"}});
  EXPECT_EQ(renamed.message, "--price-minor must be at least 0");
  EXPECT_EQ(renamed.api_code, "invalid_price");
}

TEST_F(CommandsTest, UsageErrorsAreCli11s) {
  EXPECT_EQ(Run({"keys"}).exit_code, 2);
  EXPECT_EQ(Run({"keys", "add"}).exit_code, 2);
  EXPECT_EQ(Run({"tokens", "rm"}).exit_code, 2);
}

// A name the CLI puts into an API path is refused empty, blank or with control characters before
// any request: `admin hosts drain ''` asked for /api/v1/admin/hosts//drain.
TEST_F(CommandsTest, EmptyNamesAreUsageErrorsBeforeAnyRequest) {
  LogIn();
  const size_t before = server_.requests().size();
  const std::vector<std::vector<std::string>> verbs = {
      {"admin", "hosts", "drain", ""},
      {"admin", "hosts", "undrain", " "},
      {"admin", "hosts", "rm", ""},
      {"admin", "hosts", "set-ssh", "", "--ssh-address", "10.0.0.1"},
      {"admin", "hosts", "unlink", ""},
      {"admin", "people", "set-operator", ""},
      {"admin", "gpu-types", "set", "", "--price-minor", "65"},
      {"admin", "billing", "set-card", "", "--brand", "visa", "--last4", "4242", "--exp",
       "12/2030"},
      {"instances", "rm", ""},
      {"instances", "show", "a\nb"},
      {"keys", "rm", ""},
      {"tokens", "rm", ""},
      {"team", "remove", "\t"},
      {"ssh", ""},
  };
  for (const auto& args : verbs) {
    CliResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args[args.size() > 3 ? 2 : 1] << ": " << r.err;
    EXPECT_TRUE(r.err.find("must not") != std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("/api/v1"), std::string::npos) << r.err;
  }
  EXPECT_EQ(server_.requests().size(), before);
}

// Sign-up answers alike whether or not the address has an account, and an account makes no
// API token before its address is proven: signup says to open the mail, then log in.
TEST_F(CommandsTest, SignupSendsTheRequestAndSaysToOpenTheMail) {
  CliResult r =
      Run({"signup", "--url", server_.url(), "--email", "bo@example.com", "--password-stdin"},
          "long enough\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Check the mail of bo@example.com: open the link in it to confirm the address and set "
            "your password, then run 'gpuwerk login --url " +
                server_.url() + "'.\n");
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(fs::exists(login_path())) << "nothing to log in with yet";
  EXPECT_EQ(api_.logouts, 0);
  auto reqs = server_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/api/v1/auth/signup");
  EXPECT_EQ(reqs[0].Json(), json({{"email", "bo@example.com"}, {"password", "long enough"}}));

  CliResult j = Run(
      {"signup", "--url", server_.url(), "--email", "bo@example.com", "--password-stdin", "--json"},
      "long enough\n");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out),
            json({{"url", server_.url()}, {"email", "bo@example.com"}, {"check_mail", true}}));
}

TEST_F(CommandsTest, SignupSaysWhyTheServerRefused) {
  CliResult weak =
      Run({"signup", "--url", server_.url(), "--email", "bo@example.com", "--password-stdin"},
          "short\n");
  EXPECT_EQ(weak.exit_code, 1);
  EXPECT_EQ(weak.err, "gpuwerk: Use at least 8 characters. (weak_password)\n");
  EXPECT_FALSE(fs::exists(login_path()));
  CliResult no_terminal = Run({"signup", "--url", server_.url(), "--email", "bo@example.com"});
  EXPECT_EQ(no_terminal.exit_code, 1);
  EXPECT_NE(no_terminal.err.find("--password-stdin"), std::string::npos) << no_terminal.err;
  EXPECT_TRUE(no_terminal.err.ends_with("(no_terminal)\n")) << no_terminal.err;
}

/// Instance "web" as the API shows it at each step of its launch.
json Web(const std::string& status, bool ssh, const std::string& reason = "") {
  return {{"id", "ins_1"},
          {"name", "web"},
          {"hostname", "web-x1"},
          {"status", status},
          {"status_reason", reason},
          {"hosts", {"spark-a"}},
          {"ssh_command", ssh ? json("ssh -p 2222 web-x1@127.0.0.1") : json(nullptr)}};
}

TEST_F(CommandsTest, CreateWaitPrintsTheLaunchsStepsUntilItRuns) {
  LogIn();
  api_.AddKey("laptop");
  api_.ScriptLaunch({Web("provisioning", false), Web("provisioning", false),
                     Web("provisioning", true), Web("running", true)});
  CliResult r = Run({"instances", "create", "web", "--key", "laptop", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Created instance web (web-x1), status provisioning.\n"
            "[   0s] placed on spark-a; creating the container\n"
            "[   2s] container created on spark-a; waiting for sshd\n"
            "[   3s] sshd ready: running\n"
            "Instance web is running. Connect with 'gpuwerk ssh web'.\n");
}

TEST_F(CommandsTest, CreateWithoutWaitGivesNoConnectLineWhileProvisioning) {
  LogIn();
  api_.AddKey("laptop");
  api_.ScriptLaunch({Web("provisioning", false)});
  CliResult r = Run({"instances", "create", "web", "--key", "laptop"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "Created instance web (web-x1), status provisioning. It is not running yet: wait for "
            "it with 'gpuwerk instances show web' or 'gpuwerk events' (or create with --wait).\n");
  EXPECT_EQ(r.out.find("Connect with"), std::string::npos);
}

TEST_F(CommandsTest, WaitEndsWithAClearMessageOnTimeoutAndOnFailure) {
  LogIn();
  api_.AddKey("laptop");
  api_.ScriptLaunch({Web("provisioning", false)});
  CliResult slow =
      Run({"instances", "create", "web", "--key", "laptop", "--wait", "--wait-timeout", "30"});
  EXPECT_EQ(slow.exit_code, 1);
  EXPECT_EQ(slow.err,
            "gpuwerk: instance web is not running after 30 s (placed on spark-a; creating the "
            "container); it may still start: follow it with 'gpuwerk instances show web' or "
            "'gpuwerk events' (wait_timeout)\n");

  api_.ScriptLaunch(
      {Web("restarting", true), Web("failed", false, "image_not_found: no such image")});
  CliResult failed = Run({"instances", "restart", "web", "--wait", "--json"});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_EQ(failed.out, "");
  std::istringstream lines(failed.err);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, "[   0s] restarting the container on spark-a");  // the restart's answer
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, "[   1s] failed (image_not_found: no such image)");
  ASSERT_TRUE(std::getline(lines, line));
  json problem = json::parse(line);
  EXPECT_EQ(problem["code"], "instance_failed");
  EXPECT_EQ(problem["detail"],
            "instance web failed: image_not_found: no such image; delete it with 'gpuwerk "
            "instances rm web'");
}

TEST_F(CommandsTest, JsonErrorsAreOneProblemObjectOnStderr) {
  CliResult not_logged_in = Run({"keys", "ls", "--json"});
  EXPECT_EQ(not_logged_in.exit_code, 1);
  EXPECT_EQ(not_logged_in.out, "");
  ASSERT_EQ(std::count(not_logged_in.err.begin(), not_logged_in.err.end(), '\n'), 1);
  json problem = json::parse(not_logged_in.err);
  EXPECT_EQ(problem["type"], "about:blank");
  EXPECT_EQ(problem["title"], "unauthenticated");
  EXPECT_EQ(problem["code"], "not_logged_in");
  EXPECT_EQ(problem["detail"],
            "not logged in: run 'gpuwerk login' or set GPUWERK_URL and GPUWERK_TOKEN");

  LogIn();
  CliResult unknown = Run({"keys", "rm", "nope", "--json"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(json::parse(unknown.err)["code"], "not_found");
  CliResult refused = Run({"tokens", "create", "x", "--json", "--token", "gwt_bogus"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(json::parse(refused.err)["code"], "unauthenticated");

  // A usage error too, with CLI11's exit code 2.
  CliResult usage = Run({"keys", "add", "--json"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_EQ(json::parse(usage.err)["code"], "missing_argument");
}

TEST_F(CommandsTest, EveryVerbAnswersJsonUnderJson) {
  LogIn();
  api_.AddKey("laptop");
  CliResult rm = Run({"keys", "rm", "laptop", "--json"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(json::parse(rm.out)["name"], "laptop");
  api_.AddToken("ci");
  CliResult tokens_rm = Run({"tokens", "rm", "tok_3", "--json"});
  ASSERT_EQ(tokens_rm.exit_code, 0) << tokens_rm.err;
  EXPECT_EQ(json::parse(tokens_rm.out)["name"], "ci");
  CliResult login = Run(
      {"login", "--url", server_.url(), "--email", "ada@example.com", "--password-stdin", "--json"},
      "hunter2\n");
  ASSERT_EQ(login.exit_code, 0) << login.err;
  EXPECT_EQ(json::parse(login.out), json({{"url", server_.url()}, {"email", "ada@example.com"}}));
  CliResult logout = Run({"logout", "--json"});
  ASSERT_EQ(logout.exit_code, 0) << logout.err;
  EXPECT_EQ(json::parse(logout.out), json({{"url", server_.url()}, {"logged_out", true}}));
  CliResult again = Run({"logout", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out), json({{"url", nullptr}, {"logged_out", false}}));
}

TEST_F(CommandsTest, AMistypedVerbGetsASuggestion) {
  CliResult instance = Run({"instance", "ls"});
  EXPECT_EQ(instance.exit_code, 2);
  EXPECT_EQ(instance.err,
            "gpuwerk: 'instance' is not a command of `gpuwerk`; did you mean `gpuwerk instances "
            "ls`?\n");
  CliResult key = Run({"key", "ls", "--url", "http://x"});
  EXPECT_EQ(key.err,
            "gpuwerk: 'key' is not a command of `gpuwerk`; did you mean `gpuwerk keys ls`?\n");
  CliResult lst = Run({"instances", "lst"});
  EXPECT_EQ(lst.exit_code, 2);
  EXPECT_EQ(lst.err,
            "gpuwerk: 'lst' is not a command of `gpuwerk instances`; did you mean `gpuwerk "
            "instances ls`?\n");
  CliResult admin = Run({"admin", "host", "ls"});
  EXPECT_EQ(admin.err,
            "gpuwerk: 'host' is not a command of `gpuwerk admin`; did you mean `gpuwerk admin "
            "hosts ls`?\n");
  CliResult nothing_close = Run({"frobnicate"});
  EXPECT_EQ(nothing_close.exit_code, 2);
  EXPECT_EQ(nothing_close.err,
            "gpuwerk: 'frobnicate' is not a command of `gpuwerk`; see 'gpuwerk --help'\n");
  CliResult as_json = Run({"instance", "ls", "--json"});
  EXPECT_EQ(as_json.exit_code, 2);
  json problem = json::parse(as_json.err);
  EXPECT_EQ(problem["code"], "unknown_command");
  EXPECT_NE(problem["detail"].get<std::string>().find("`gpuwerk instances ls`"), std::string::npos);
}

// New-user trial: an unknown flag or a missing argument printed CLI11's plain text; now one line
// in the CLI's style saying what is wrong and which help to read, exit code 2, and under --json a
// problem with a stable code.
TEST_F(CommandsTest, UsageErrorsAreOneLineNamingTheCommandsHelp) {
  CliResult flag = Run({"instances", "create", "alpha", "--key", "laptop", "--foo"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_EQ(flag.out, "");
  EXPECT_EQ(flag.err, "gpuwerk: unknown option --foo; see `gpuwerk instances create --help`\n");
  CliResult with_value = Run({"keys", "ls", "--colour=red"});
  EXPECT_EQ(with_value.err, "gpuwerk: unknown option --colour; see `gpuwerk keys ls --help`\n");
  CliResult missing = Run({"keys", "add"});
  EXPECT_EQ(missing.exit_code, 2);
  ASSERT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  EXPECT_TRUE(missing.err.starts_with("gpuwerk: ")) << missing.err;
  EXPECT_TRUE(missing.err.ends_with("; see `gpuwerk keys add --help`\n")) << missing.err;

  CliResult flag_json = Run({"instances", "create", "alpha", "--key", "laptop", "--foo", "--json"});
  EXPECT_EQ(flag_json.exit_code, 2);
  json problem = json::parse(flag_json.err);
  EXPECT_EQ(problem["code"], "unknown_option");
  EXPECT_EQ(problem["detail"], "unknown option --foo; see `gpuwerk instances create --help`");
  CliResult missing_json = Run({"keys", "add", "--json"});
  EXPECT_EQ(json::parse(missing_json.err)["code"], "missing_argument") << missing_json.err;
}

// New-user trial: `instances rm web` run twice said "Deleting web" both times; the second says it
// is already being deleted, and sends no second DELETE.
TEST_F(CommandsTest, RemovingAnInstanceTwiceSaysItIsAlreadyBeingDeleted) {
  LogIn();
  api_.ScriptLaunch({{{"id", "ins_1"}, {"name", "web"}, {"status", "running"}}});
  CliResult first = Run({"instances", "rm", "web"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "Deleting web; its billing session has ended.\n");
  CliResult second = Run({"instances", "rm", "web"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, "web is already being deleted; it is gone once its host has removed it.\n");
  EXPECT_EQ(api_.instance_deletes(), 1);
  CliResult as_json = Run({"instances", "rm", "web", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_EQ(json::parse(as_json.out)["status"], "deleting");
}

// The help says what the verbs do and how long their mailed links live (docs/accounts.md).
TEST_F(CommandsTest, SignupAndAdminInviteHelpSayWhatTheyDoAndWhenTheLinkExpires) {
  CliResult signup = Run({"signup", "--help"});
  EXPECT_NE(signup.out.find("mails the address a link (valid 24 hours)"), std::string::npos)
      << signup.out;
  EXPECT_NE(signup.out.find("then run `gpuwerk login`"), std::string::npos) << signup.out;
  EXPECT_EQ(signup.out.find("then log in as"), std::string::npos) << signup.out;
  CliResult invite = Run({"admin", "invite", "--help"});
  EXPECT_NE(invite.out.find("valid 7 days"), std::string::npos) << invite.out;
  EXPECT_NE(invite.out.find("voids the older one"), std::string::npos) << invite.out;
}

// New-user trial: ssh's own options before `--` got CLI11's "The following argument was not
// expected: -i"; the message now says they go after `--` and shows the command reordered.
TEST_F(CommandsTest, SshOptionsBeforeDashesAreShownAfterThem) {
  const std::string expected =
      "gpuwerk: ssh's own options (-i) go after `--`, which ends gpuwerk's options: `gpuwerk ssh "
      "alpha -- -i KEY hostname`\n";
  CliResult before_name = Run({"ssh", "-i", "KEY", "alpha", "hostname"});
  EXPECT_EQ(before_name.exit_code, 2);
  EXPECT_EQ(before_name.err, expected);
  CliResult after_name = Run({"ssh", "alpha", "-i", "KEY", "hostname"});
  EXPECT_EQ(after_name.exit_code, 2);
  EXPECT_EQ(after_name.err, expected);
  CliResult flags = Run({"ssh", "alpha", "-v", "hostname", "--", "-x"});
  EXPECT_EQ(flags.err,
            "gpuwerk: ssh's own options (-v) go after `--`, which ends gpuwerk's options: "
            "`gpuwerk ssh alpha -- -v hostname -x`\n");
  CliResult as_json = Run({"ssh", "alpha", "-i", "KEY", "--json"});
  EXPECT_EQ(as_json.exit_code, 2);
  json problem = json::parse(as_json.err);
  EXPECT_EQ(problem["code"], "usage_error");
  EXPECT_NE(problem["detail"].get<std::string>().find("`gpuwerk ssh alpha --json -- -i KEY`"),
            std::string::npos)
      << as_json.err;
}

// New-user trial: `gpuwerk admin --help` showed "Manage GPU types (R-7)", an internal rule number.
TEST_F(CommandsTest, HelpShowsNoInternalRuleNumbers) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"},
                                               {"admin", "--help"},
                                               {"admin", "gpu-types", "--help"},
                                               {"keys", "--help"},
                                               {"instances", "--help"},
                                               {"queue", "--help"}}) {
    CliResult help = Run(args);
    EXPECT_FALSE(help.out.empty()) << args.front();
    EXPECT_EQ(help.out.find("(R-"), std::string::npos) << help.out;
  }
  EXPECT_NE(Run({"admin", "--help"}).out.find("Manage GPU types\n"), std::string::npos);
}

TEST_F(CommandsTest, UsageSessionsPassesTheCursorAndPrintsTheNeighbours) {
  LogIn();
  CliResult r = Run({"usage", "sessions", "--before", "300.bil_c"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server_.requests().back().target, "/api/v1/usage/sessions?before=300.bil_c");
  EXPECT_NE(r.out.find("0.66 USD so far"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("active"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Page 2 of 3. Older: gpuwerk usage sessions --before 100.bil_a Newer: "
                       "gpuwerk usage sessions --after 200.bil_b"),
            std::string::npos)
      << r.out;
  CliResult j = Run({"usage", "sessions", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out)["next"], "100.bil_a");
  CliResult bad = Run({"usage", "sessions", "--after", "x&y=1"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("(invalid_cursor)"), std::string::npos) << bad.err;
}

TEST_F(CommandsTest, AdminInvoicesExportWritesTheCsvAsItCame) {
  LogIn();
  const fs::path file = tmp_.path() / "nov.csv";
  CliResult r = Run({"admin", "invoices", "export", "--month", "2026-11", "-o", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server_.requests().back().target, "/api/v1/admin/invoices/export?month=2026-11");
  std::ifstream in(file, std::ios::binary);
  std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(csv, "invoice_id,instance_name\r\ninv_1,'=x\r\n");
  CliResult bad = Run({"admin", "invoices", "export", "--month", "november"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--month 2026-11"), std::string::npos) << bad.err;
  EXPECT_EQ(server_.requests().back().target, "/api/v1/admin/invoices/export?month=2026-11");
}

TEST_F(CommandsTest, AdminInvoicesCloseSaysWhatWasPushedAndWhatFailed) {
  LogIn();
  CliResult r = Run({"admin", "invoices", "close", "--month", "2026-11"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Closed 2026-11: 2 invoices made now, 5 in all."), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Pushed to stripe now: 1 invoices; pushed before: 3; failed: 1."),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("pushed inv_1 (billing account solo_per_1) as in_1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("failed inv_2 (billing account team_2): no_customer:"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "outside text is made safe";
  EXPECT_NE(r.out.find("tries again from 2026-12-01T01:01:00Z"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("export"), std::string::npos) << r.out;
  // The manual provider pushes nothing: the operator exports.
  CliResult manual = Run({"admin", "invoices", "close", "--month", "2025-11"});
  ASSERT_EQ(manual.exit_code, 0) << manual.err;
  EXPECT_NE(manual.out.find("gpuwerk admin invoices export --month 2025-11"), std::string::npos)
      << manual.out;
  EXPECT_EQ(manual.out.find("Pushed"), std::string::npos) << manual.out;
  // The month typed without --month is the month; two different months are refused.
  CliResult bare = Run({"admin", "invoices", "close", "2025-11"});
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_NE(bare.out.find("Closed 2025-11"), std::string::npos) << bare.out;
  CliResult two = Run({"admin", "invoices", "close", "2025-10", "--month", "2025-11"});
  EXPECT_EQ(two.exit_code, 1);
  EXPECT_NE(two.err.find("(invalid_month)"), std::string::npos) << two.err;
  CliResult none = Run({"admin", "invoices", "close"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("--month YYYY-MM"), std::string::npos) << none.err;
}

// A month without invoice lines (most often never closed) says so on stderr; the CSV is still
// the server's.
TEST_F(CommandsTest, AdminInvoicesExportOfAMonthWithoutLinesSaysSo) {
  LogIn();
  CliResult r = Run({"admin", "invoices", "export", "--month", "2027-01"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "invoice_id,instance_name\r\n");
  EXPECT_NE(r.err.find("warning: no invoice lines for 2027-01"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("admin invoices close --month 2027-01"), std::string::npos) << r.err;
  CliResult full = Run({"admin", "invoices", "export", "--month", "2026-11"});
  EXPECT_EQ(full.err, "");
}

TEST(EditDistanceTest, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("instance", "instances"), 1u);
  EXPECT_EQ(EditDistance("lst", "ls"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
}

}  // namespace
}  // namespace gpuwerk::cli
