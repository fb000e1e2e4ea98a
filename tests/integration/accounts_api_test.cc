// Accounts over real HTTP against an in-process server (R-1, R-2, R-3, R-19; cases C26, C27).
#include <gtest/gtest.h>

#include "core/time_format.h"
#include "tests/integration/server_fixture.h"

namespace gpuwerk::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class AccountsApiTest : public ServerTest {};

TEST_F(AccountsApiTest, SignUpSignInSignOutWithCookieFlags) {
  auto b = Browser();
  auto r = b->PostJson("/api/v1/auth/signup",
                       {{"email", "alice@example.test"}, {"password", "correct horse battery"}});
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(r.Header("set-cookie"), "") << "sign-up signs nobody in; the mailed link does";
  const std::string link = LinkToken("alice@example.test", kAddressProofPath);
  ASSERT_FALSE(link.empty());
  r = b->PostJson("/api/v1/auth/prove-address/consume",
                  {{"token", link}, {"password", "correct horse battery"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["person"]["email"], "alice@example.test");
  const std::string cookie = r.Header("set-cookie");
  EXPECT_NE(cookie.find("gpuwerk_session="), std::string::npos);
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(cookie.find("SameSite=Lax"), std::string::npos);
  EXPECT_NE(cookie.find("Path=/"), std::string::npos);
  EXPECT_EQ(cookie.find("Secure"), std::string::npos) << "plain http has no Secure flag";

  auto me = b->Get("/api/v1/me");
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.Json()["email"], "alice@example.test");

  ASSERT_EQ(b->PostJson("/api/v1/auth/logout", nlohmann::json::object()).status, 204);
  ExpectProblem(b->Get("/api/v1/me"), 401, "unauthenticated");

  auto in = b->PostJson("/api/v1/auth/login",
                        {{"email", "alice@example.test"}, {"password", "correct horse battery"}});
  ASSERT_EQ(in.status, 200) << in.body;
  EXPECT_EQ(b->Get("/api/v1/me").status, 200);
}

// Issue 11 (enumeration): sign-up answers a new address, an unproven account's and a proven
// account's alike (status, body, no cookie); only the mail tells the mailbox's owner which.
TEST_F(AccountsApiTest, SignUpAnswersAlikeWhetherOrNotTheAddressHasAnAccount) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto fresh = Browser()->PostJson("/api/v1/auth/signup",
                                   {{"email", "bob@example.test"}, {"password", "bob password 1"}});
  const std::string bobs_first_link = LinkToken("bob@example.test", kAddressProofPath);
  ASSERT_FALSE(bobs_first_link.empty());
  auto unproven = Browser()->PostJson(
      "/api/v1/auth/signup", {{"email", "bob@example.test"}, {"password", "bob password 2"}});
  auto proven = Browser()->PostJson(
      "/api/v1/auth/signup", {{"email", "Alice@example.test"}, {"password", "other password 1"}});
  for (const HttpResult* r : {&fresh, &unproven, &proven}) {
    EXPECT_EQ(r->status, 202) << r->body;
    EXPECT_EQ(r->body, fresh.body);
    EXPECT_EQ(r->Header("set-cookie"), "");
  }
  // Alice is told, and nothing changed: her password works, the stranger's does not.
  bool told = false;
  for (const auto& m : Mails("alice@example.test", 1)) {
    told = told || (m.subject.find("tried to sign up") != std::string::npos &&
                    m.TokenFromLink("token").empty());
  }
  EXPECT_TRUE(told) << "the owner gets a notice, without a link that does anything";
  ExpectProblem(Browser()->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                           {"password", "other password 1"}}),
                401, "invalid_credentials");
  EXPECT_EQ(Browser()
                ->PostJson("/api/v1/auth/login",
                           {{"email", "alice@example.test"}, {"password", "correct horse battery"}})
                .status,
            200);
  // Bob's account is still unproven: his second sign-up mailed a fresh link, voiding the first.
  // (Which is which is known from the order of sending, not of landing: see NewLinkToken.)
  const std::vector<std::string> links = {
      bobs_first_link, NewLinkToken("bob@example.test", kAddressProofPath, {bobs_first_link})};
  ASSERT_FALSE(links[1].empty());
  ExpectProblem(Browser()->PostJson("/api/v1/auth/prove-address/consume",
                                    {{"token", links[0]}, {"password", "bob password 3"}}),
                401, "invalid_link");
  EXPECT_EQ(Browser()
                ->PostJson("/api/v1/auth/prove-address/consume",
                           {{"token", links[1]}, {"password", "bob password 3"}})
                .status,
            200);
}

// The address-proof link opens a page; only its form POST (with the password to set) uses it.
TEST_F(AccountsApiTest, AddressProofLinkSurvivesScannersAndExpires) {
  ASSERT_EQ(Browser()
                ->PostJson("/api/v1/auth/signup",
                           {{"email", "carol@example.test"}, {"password", "carol password 1"}})
                .status,
            202);
  const std::string token = LinkToken("carol@example.test", kAddressProofPath);
  ASSERT_FALSE(token.empty());
  auto scanner = Browser();
  for (int i = 0; i < 2; ++i) {
    auto page = scanner->Get(std::string(kAddressProofPath) + "?token=" + token);
    EXPECT_EQ(page.status, 200);
    EXPECT_EQ(page.Header("set-cookie"), "") << "a GET must not sign in";
    EXPECT_NE(page.body.find("name=\"password\""), std::string::npos) << page.body;
    EXPECT_EQ(scanner->Head(std::string(kAddressProofPath) + "?token=" + token).status, 200);
  }
  auto b = Browser();
  auto weak = b->Post(kAddressProofPath, "token=" + token + "&password=short",
                      "application/x-www-form-urlencoded");
  EXPECT_EQ(weak.status, 400) << "a weak password uses nothing up";
  auto press = b->Post(kAddressProofPath, "token=" + token + "&password=carolpassword2",
                       "application/x-www-form-urlencoded");
  EXPECT_EQ(press.status, 303) << press.body;
  EXPECT_EQ(b->Get("/api/v1/me").Json()["email"], "carol@example.test");
  ExpectProblem(Browser()->PostJson("/api/v1/auth/prove-address/consume",
                                    {{"token", token}, {"password", "carolpassword3"}}),
                401, "invalid_link");
  EXPECT_EQ(Browser()
                ->PostJson("/api/v1/auth/login",
                           {{"email", "carol@example.test"}, {"password", "carolpassword2"}})
                .status,
            200);

  // A link works for 24 hours.
  ASSERT_EQ(Browser()
                ->PostJson("/api/v1/auth/signup",
                           {{"email", "dave@example.test"}, {"password", "dave password 1"}})
                .status,
            202);
  const std::string late = LinkToken("dave@example.test", kAddressProofPath);
  ASSERT_FALSE(late.empty());
  clock_.Advance(24h);
  ExpectProblem(Browser()->PostJson("/api/v1/auth/prove-address/consume",
                                    {{"token", late}, {"password", "dave password 2"}}),
                401, "invalid_link");
}

TEST_F(AccountsApiTest, SecureCookieUnderHttpsPublicUrl) {
  // The flag follows the public URL, which is what the browser sees behind a TLS proxy.
  app_->Stop();
  app_.reset();
  config_.public_url = "https://gpu.example.test";
  auto app = app::ServerApp::Start(config_, clock_, rng_);
  ASSERT_TRUE(app) << app.error().message;
  app_ = std::move(*app);
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  auto r = Browser()->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                      {"password", "correct horse battery"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string set_cookie = r.Header("set-cookie");
  EXPECT_NE(set_cookie.find("; Secure"), std::string::npos);
  // `__Host-` under TLS: a browser takes it only Secure, Path=/ and without Domain, so a
  // sibling subdomain cannot set it (login CSRF); the plain name is not read any more.
  ASSERT_TRUE(set_cookie.starts_with("__Host-gpuwerk_session=")) << set_cookie;
  EXPECT_EQ(set_cookie.find("Domain"), std::string::npos);
  EXPECT_NE(set_cookie.find("Path=/;"), std::string::npos);
  const std::string value =
      set_cookie.substr(std::string_view("__Host-gpuwerk_session=").size(),
                        set_cookie.find(';') - std::string_view("__Host-gpuwerk_session=").size());
  ASSERT_FALSE(value.empty());
  EXPECT_EQ(Browser()->Get("/api/v1/me", {"Cookie: __Host-gpuwerk_session=" + value}).status, 200);
  ExpectProblem(Browser()->Get("/api/v1/me", {"Cookie: gpuwerk_session=" + value}), 401,
                "unauthenticated");
  auto out = Browser()->PostJson("/api/v1/auth/logout", nlohmann::json::object(),
                                 {"Cookie: __Host-gpuwerk_session=" + value});
  ASSERT_EQ(out.status, 204) << out.body;
  EXPECT_TRUE(out.Header("set-cookie").starts_with("__Host-gpuwerk_session=; "))
      << out.Header("set-cookie");
  ExpectProblem(Browser()->Get("/api/v1/me", {"Cookie: __Host-gpuwerk_session=" + value}), 401,
                "unauthenticated");
}

TEST_F(AccountsApiTest, WrongPasswordAndUnknownEmailLookTheSame) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  auto wrong = b->PostJson("/api/v1/auth/login",
                           {{"email", "alice@example.test"}, {"password", "not the password"}});
  ExpectProblem(wrong, 401, "invalid_credentials");
  auto unknown = b->PostJson("/api/v1/auth/login",
                             {{"email", "nobody@example.test"}, {"password", "not the password"}});
  ExpectProblem(unknown, 401, "invalid_credentials");
  EXPECT_EQ(wrong.Json()["detail"], unknown.Json()["detail"]);
}

TEST_F(AccountsApiTest, RateLimitTripsPerAccountAndRecovers) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  for (int i = 0; i < config_.sign_in_failures_per_account; ++i) {
    ExpectProblem(b->PostJson("/api/v1/auth/login",
                              {{"email", "alice@example.test"}, {"password", "wrong-password"}}),
                  401, "invalid_credentials");
  }
  // Now even the right password is refused, with a Retry-After.
  auto limited = b->PostJson("/api/v1/auth/login", {{"email", "ALICE@example.test"},
                                                    {"password", "correct horse battery"}});
  ExpectProblem(limited, 429, "rate_limited");
  EXPECT_FALSE(limited.Header("retry-after").empty());
  clock_.Advance(std::chrono::seconds(config_.sign_in_window_seconds + 1));
  auto ok = b->PostJson("/api/v1/auth/login",
                        {{"email", "alice@example.test"}, {"password", "correct horse battery"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// Issue 11: wrong passwords from one address lock that address out of the account; the owner,
// signing in from another address, is not locked out.
TEST_F(AccountsApiTest, WrongPasswordsFromOneAddressDoNotLockOutTheOwnerElsewhere) {
  auto owner = Browser();
  SignUp(*owner, "alice@example.test");
  auto attacker = Browser();
  attacker->SetSourceAddress("127.0.0.2");
  for (int i = 0; i < config_.sign_in_failures_per_account; ++i) {
    ExpectProblem(
        attacker->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                  {"password", "guess " + std::to_string(i)}}),
        401, "invalid_credentials");
  }
  ExpectProblem(attacker->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                          {"password", "correct horse battery"}}),
                429, "rate_limited");
  auto in = Browser()->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                       {"password", "correct horse battery"}});
  EXPECT_EQ(in.status, 200) << in.body;
}

TEST_F(AccountsApiTest, RateLimitTripsPerAddress) {
  auto b = Browser();
  for (int i = 0; i < config_.sign_in_failures_per_address; ++i) {
    b->PostJson("/api/v1/auth/login", {{"email", "user" + std::to_string(i) + "@example.test"},
                                       {"password", "wrong-password"}});
  }
  ExpectProblem(b->PostJson("/api/v1/auth/login",
                            {{"email", "fresh@example.test"}, {"password", "wrong-password"}}),
                429, "rate_limited");
}

TEST_F(AccountsApiTest, C26_ScannerGetDoesNotConsumeMagicLink) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  b->ClearCookies();
  ASSERT_EQ(b->PostJson("/api/v1/auth/magic-link", {{"email", "alice@example.test"}}).status, 202);
  const std::string token = LinkToken("alice@example.test", "/auth/magic-link");
  ASSERT_FALSE(token.empty());

  // A mail scanner fetches the link, with GET and HEAD, several times.
  auto scanner = Browser();
  for (int i = 0; i < 3; ++i) {
    auto page = scanner->Get("/auth/magic-link?token=" + token);
    EXPECT_EQ(page.status, 200);
    EXPECT_EQ(page.Header("set-cookie"), "") << "a GET must not sign in";
    EXPECT_NE(page.body.find("<form"), std::string::npos) << "the page has a button to press";
    EXPECT_EQ(scanner->Head("/auth/magic-link?token=" + token).status, 200);
  }
  ExpectProblem(scanner->Get("/api/v1/me"), 401, "unauthenticated");

  // The person presses the button: the form POST consumes the token and signs in.
  auto press = b->Post("/auth/magic-link", "token=" + token, "application/x-www-form-urlencoded");
  EXPECT_EQ(press.status, 303) << press.body;
  EXPECT_EQ(b->Get("/api/v1/me").Json()["email"], "alice@example.test");

  // Single use.
  auto again = Browser();
  ExpectProblem(again->PostJson("/api/v1/auth/magic-link/consume", {{"token", token}}), 401,
                "invalid_link");

  // The same holds for the reset-password link: GET and HEAD from a scanner consume nothing,
  // sign nobody in, and the person's form POST still sets the password.
  ASSERT_EQ(
      Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}}).status,
      202);
  const std::string reset = LinkToken("alice@example.test", "/auth/reset-password");
  ASSERT_FALSE(reset.empty());
  for (int i = 0; i < 3; ++i) {
    auto page = scanner->Get("/auth/reset-password?token=" + reset);
    EXPECT_EQ(page.status, 200);
    EXPECT_EQ(page.Header("set-cookie"), "") << "a GET must not sign in";
    EXPECT_NE(page.body.find("<form"), std::string::npos) << "the page has a form to submit";
    auto head = scanner->Head("/auth/reset-password?token=" + reset);
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(head.Header("set-cookie"), "") << "a HEAD must not sign in";
  }
  ExpectProblem(scanner->Get("/api/v1/me"), 401, "unauthenticated");
  auto set = Browser()->PostJson("/api/v1/auth/password-reset/consume",
                                 {{"token", reset}, {"password", "scanned but unused 1"}});
  EXPECT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(Browser()
                ->PostJson("/api/v1/auth/login",
                           {{"email", "alice@example.test"}, {"password", "scanned but unused 1"}})
                .status,
            200);
}

TEST_F(AccountsApiTest, MagicLinkExpiresAfterFifteenMinutes) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  ASSERT_EQ(b->PostJson("/api/v1/auth/magic-link", {{"email", "alice@example.test"}}).status, 202);
  const std::string early = LinkToken("alice@example.test", "/auth/magic-link", 1);
  clock_.Advance(14min);
  auto fresh = Browser();
  EXPECT_EQ(fresh->PostJson("/api/v1/auth/magic-link/consume", {{"token", early}}).status, 200);
  ASSERT_EQ(b->PostJson("/api/v1/auth/magic-link", {{"email", "alice@example.test"}}).status, 202);
  const std::string late = LinkToken("alice@example.test", "/auth/magic-link", 2);
  ASSERT_FALSE(late.empty());
  clock_.Advance(15min);
  ExpectProblem(Browser()->PostJson("/api/v1/auth/magic-link/consume", {{"token", late}}), 401,
                "invalid_link");
}

TEST_F(AccountsApiTest, PasswordResetSetsPasswordAndEndsOtherSessions) {
  auto laptop = Browser();
  SignUp(*laptop, "alice@example.test", "old password 123");
  auto phone = Browser();
  ASSERT_EQ(phone
                ->PostJson("/api/v1/auth/login",
                           {{"email", "alice@example.test"}, {"password", "old password 123"}})
                .status,
            200);
  auto anon = Browser();
  ASSERT_EQ(anon->PostJson("/api/v1/auth/password-reset", {{"email", "Alice@EXAMPLE.test"}}).status,
            202);
  const std::string token = LinkToken("alice@example.test", "/auth/reset-password");
  ASSERT_FALSE(token.empty());
  // The link page, fetched by a scanner, changes nothing.
  EXPECT_EQ(anon->Get("/auth/reset-password?token=" + token).status, 200);

  ExpectProblem(anon->PostJson("/api/v1/auth/password-reset/consume",
                               {{"token", token}, {"password", "short"}}),
                400, "weak_password");
  auto reset = anon->PostJson("/api/v1/auth/password-reset/consume",
                              {{"token", token}, {"password", "new password 456"}});
  ASSERT_EQ(reset.status, 200) << reset.body;
  ExpectProblem(laptop->Get("/api/v1/me"), 401, "unauthenticated");
  ExpectProblem(phone->Get("/api/v1/me"), 401, "unauthenticated");
  ExpectProblem(anon->PostJson("/api/v1/auth/login",
                               {{"email", "alice@example.test"}, {"password", "old password 123"}}),
                401, "invalid_credentials");
  EXPECT_EQ(anon->PostJson("/api/v1/auth/login",
                           {{"email", "alice@example.test"}, {"password", "new password 456"}})
                .status,
            200);
  ExpectProblem(Browser()->PostJson("/api/v1/auth/password-reset/consume",
                                    {{"token", token}, {"password", "another password"}}),
                401, "invalid_link");
}

TEST_F(AccountsApiTest, C27_EmailsCompareCaseInsensitively) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  // Signing up again in other letters makes no second account and changes nothing.
  EXPECT_EQ(Browser()
                ->PostJson("/api/v1/auth/signup",
                           {{"email", "  Alice@Example.test "}, {"password", "another password"}})
                .status,
            202);
  ExpectProblem(Browser()->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                           {"password", "another password"}}),
                401, "invalid_credentials");
  EXPECT_EQ(Browser()
                ->PostJson("/api/v1/auth/login",
                           {{"email", "ALICE@EXAMPLE.TEST"}, {"password", "correct horse battery"}})
                .status,
            200);
  ASSERT_EQ(
      Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "aLiCe@example.TEST"}}).status,
      202);
  EXPECT_FALSE(LinkToken("alice@example.test", "/auth/reset-password").empty());

  // The store enforces it, not only the sign-up code: one row per normalised address, and a
  // second row with the same normalised address is refused by the unique index.
  auto& db = app_->database();
  auto rows = db.Read([](store::Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM persons WHERE "
                                                   "email_norm = 'alice@example.test'"));
    return row->Int(0);
  });
  ASSERT_TRUE(rows);
  EXPECT_EQ(*rows, 1);
  auto insert = [&](const std::string& id, const std::string& email_norm) {
    return db.Write([&](store::Transaction& tx) -> core::Result<int64_t> {
      return tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?, ?, ?, 0)",
                     {id, std::string("ALICE@example.test"), email_norm});
    });
  };
  // The statement itself is fine (another normalised address is stored) ...
  auto other = insert("per_other", "other@example.test");
  ASSERT_TRUE(other) << other.error().message;
  // ... and only the index refuses the same normalised address.
  auto twin = insert("per_twin", "alice@example.test");
  ASSERT_FALSE(twin) << "a second row with the same normalised address was stored";
  EXPECT_TRUE(store::IsConstraintViolation(twin.error())) << twin.error().message;
}

TEST_F(AccountsApiTest, NoAccountEnumerationThroughLinks) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  auto known = Browser()->PostJson("/api/v1/auth/magic-link", {{"email", "alice@example.test"}});
  auto unknown = Browser()->PostJson("/api/v1/auth/magic-link", {{"email", "eve@example.test"}});
  EXPECT_EQ(known.status, 202);
  EXPECT_EQ(unknown.status, 202);
  EXPECT_EQ(known.body, unknown.body);
  auto known_reset =
      Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}});
  auto unknown_reset =
      Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "eve@example.test"}});
  EXPECT_EQ(known_reset.status, unknown_reset.status);
  EXPECT_EQ(known_reset.body, unknown_reset.body);
  // The unknown address gets a note, not a link.
  auto mails = Mails("eve@example.test", 2);
  ASSERT_EQ(mails.size(), 2u);
  EXPECT_EQ(mails[0].TokenFromLink("token"), "");
}

TEST_F(AccountsApiTest, CrossSiteRequestsWithTheCookieAreRefused) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  ExpectProblem(b->PostJson("/api/v1/tokens", {{"name", "evil"}}, {"Origin: https://evil.example"}),
                403, "origin_mismatch");
  EXPECT_EQ(b->Get("/api/v1/tokens").Json()["total"], 0);
  EXPECT_EQ(
      b->PostJson("/api/v1/tokens", {{"name", "mine"}}, {"Origin: " + app_->base_url()}).status,
      201);
}

// The Origin check compares scheme, host and port with the server's (its public URL, here
// http://127.0.0.1:<port>): an https origin on this http-only server, another port or a userinfo
// trick is refused; the same origin with its default port spelled out or its host in capitals
// passes.
TEST_F(AccountsApiTest, OriginMustMatchSchemeHostAndPort) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  const std::string base = app_->base_url();  // http://127.0.0.1:<port>
  ASSERT_TRUE(base.starts_with("http://")) << base;
  const std::string authority = base.substr(std::string("http://").size());
  const std::string port = authority.substr(authority.rfind(':') + 1);
  for (const std::string& origin :
       {"https://" + authority, "http://127.0.0.1:" + std::to_string(std::stoi(port) + 1),
        std::string("http://127.0.0.1"), "HTTP://" + authority, base + "/",
        "http://evil@" + authority, "http://" + authority + ".evil.example", std::string("null")}) {
    ExpectProblem(b->PostJson("/api/v1/tokens", {{"name", "evil"}}, {"Origin: " + origin}), 403,
                  "origin_mismatch");
  }
  EXPECT_EQ(b->Get("/api/v1/tokens").Json()["total"], 0);
  EXPECT_EQ(b->PostJson("/api/v1/tokens", {{"name", "mine"}}, {"Origin: " + base}).status, 201);
}

TEST_F(AccountsApiTest, ApiTokensAuthenticateUntilDeleted) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  auto created = b->PostJson("/api/v1/tokens", {{"name", "laptop"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string secret = created.Json()["token"];
  const std::string id = created.Json()["id"];
  ExpectProblem(b->PostJson("/api/v1/tokens", {{"name", "laptop"}}), 409, "name_taken");

  auto cli = Browser();
  cli->SetBearer(secret);
  auto me = cli->Get("/api/v1/me");
  ASSERT_EQ(me.status, 200);
  EXPECT_EQ(me.Json()["authenticated_by"], "api_token");
  auto list = b->Get("/api/v1/tokens");
  EXPECT_EQ(list.body.find(secret), std::string::npos) << "the secret is shown once only";
  ASSERT_EQ(b->Delete("/api/v1/tokens/" + id).status, 204);
  ExpectProblem(cli->Get("/api/v1/me"), 401, "unauthenticated");
  cli->SetBearer("gwt_not-a-token");
  ExpectProblem(cli->Get("/api/v1/me"), 401, "unauthenticated");
}

// Issue 11, finding 6 (pre-claim): a squatter signs up with the victim's address. With address
// proof required, the squatter can sign in with the password they chose but can make no API token
// (nor add a key, launch or queue); the victim, proving the mailbox, claims the account, and the
// squatter's sign-in and password are refused from then on.
TEST_F(AccountsApiTest, PreClaim_SquatterCannotMakeATokenAndTheMailboxOwnerClaimsTheAccount) {
  auto squatter = Browser();
  auto signed_up = squatter->PostJson("/api/v1/auth/signup", {{"email", "victim@example.test"},
                                                              {"password", "squatter password 1"}});
  ASSERT_EQ(signed_up.status, 202) << signed_up.body;
  ASSERT_EQ(squatter
                ->PostJson("/api/v1/auth/login",
                           {{"email", "victim@example.test"}, {"password", "squatter password 1"}})
                .status,
            200);
  auto me = squatter->Get("/api/v1/me");
  ASSERT_EQ(me.status, 200) << me.body;
  EXPECT_EQ(me.Json()["email_proven"], false);
  ExpectProblem(squatter->PostJson("/api/v1/tokens", {{"name", "kept"}}), 403, "email_unverified");
  ExpectProblem(squatter->PostJson("/api/v1/ssh-keys",
                                   {{"name", "laptop"}, {"public_key", "ssh-ed25519 AAAA x"}}),
                403, "email_unverified");
  ExpectProblem(
      squatter->PostJson("/api/v1/instances",
                         {{"name", "web"}, {"ssh_key_id", "key_x"}, {"gpu_type", "spark-1x"}}),
      403, "email_unverified");
  ExpectProblem(
      squatter->PostJson("/api/v1/queue-entries",
                         {{"name", "web"}, {"ssh_key_id", "key_x"}, {"gpu_type", "spark-1x"}}),
      403, "email_unverified");
  EXPECT_EQ(squatter->Get("/api/v1/tokens").Json()["total"], 0) << "nothing was made";

  // The real owner signs up too (the same answer), and proves the mailbox with the fresh link.
  // (The squatter's link is taken before the owner's sign-up mails the fresh one: the two mails
  // may land in either order, so "the second file" is not "the fresh link"; that was this test's
  // flake, 401 where 200, when a loaded machine delivered the fresh mail first.)
  const std::string squatters_link = LinkToken("victim@example.test", kAddressProofPath);
  ASSERT_FALSE(squatters_link.empty());
  auto owner = Browser();
  auto again = owner->PostJson(
      "/api/v1/auth/signup", {{"email", "victim@example.test"}, {"password", "owner password 22"}});
  EXPECT_EQ(again.status, 202);
  EXPECT_EQ(again.body, signed_up.body);
  const std::vector<std::string> links = {
      squatters_link, NewLinkToken("victim@example.test", kAddressProofPath, {squatters_link})};
  ASSERT_FALSE(links[1].empty());
  ASSERT_EQ(owner
                ->PostJson("/api/v1/auth/prove-address/consume",
                           {{"token", links[1]}, {"password", "owner password 22"}})
                .status,
            200);

  ExpectProblem(squatter->Get("/api/v1/me"), 401, "unauthenticated");
  ExpectProblem(Browser()->PostJson("/api/v1/auth/login", {{"email", "victim@example.test"},
                                                           {"password", "squatter password 1"}}),
                401, "invalid_credentials");
  ExpectProblem(Browser()->PostJson("/api/v1/auth/prove-address/consume",
                                    {{"token", links[0]}, {"password", "squatter password 2"}}),
                401, "invalid_link");
  EXPECT_EQ(owner->Get("/api/v1/me").Json()["email_proven"], true);
  EXPECT_EQ(owner->PostJson("/api/v1/tokens", {{"name", "mine"}}).status, 201);
}

// A password change voids every unused link of the person and mails a notice, so a squatter
// who could change the unproven account's password again and again would void the owner's
// proof, reset and magic links one after another and flood their mailbox (issue 11 finding 6).
TEST_F(AccountsApiTest, PreClaim_SquatterCannotChangeThePasswordToVoidTheOwnersLinks) {
  const std::string email = "owner@example.test";
  auto squatter = Browser();
  ASSERT_EQ(
      squatter
          ->PostJson("/api/v1/auth/signup", {{"email", email}, {"password", "squatter password 1"}})
          .status,
      202);
  ASSERT_EQ(
      squatter
          ->PostJson("/api/v1/auth/login", {{"email", email}, {"password", "squatter password 1"}})
          .status,
      200);
  // The owner asks for a reset link; the proof link mailed at the squatter's sign-up is in the
  // owner's mailbox too.
  ASSERT_EQ(Browser()->PostJson("/api/v1/auth/password-reset", {{"email", email}}).status, 202);
  const std::string reset = LinkToken(email, "/auth/reset-password");
  ASSERT_FALSE(reset.empty());

  for (int i = 0; i < 3; ++i) {
    ExpectProblem(
        squatter->PostJson("/api/v1/me/password", {{"current_password", "squatter password 1"},
                                                   {"new_password", "squatter password 2"}}),
        403, "email_unverified");
  }
  ASSERT_EQ(
      squatter
          ->PostJson("/api/v1/auth/login", {{"email", email}, {"password", "squatter password 1"}})
          .status,
      200)
      << "the password did not change";

  // The owner's mailed link still works, and claims the account.
  auto owner = Browser();
  ASSERT_EQ(owner
                ->PostJson("/api/v1/auth/password-reset/consume",
                           {{"token", reset}, {"password", "owner password 22"}})
                .status,
            200);
  ASSERT_EQ(
      owner->PostJson("/api/v1/auth/login", {{"email", email}, {"password", "owner password 22"}})
          .status,
      200);
  EXPECT_EQ(owner->Get("/api/v1/me").Json()["email_proven"], true);
  ExpectProblem(squatter->Get("/api/v1/me"), 401, "unauthenticated");

  // The mailbox holds the proof link and the reset link, and no "password changed" notice.
  auto mails = Mails(email, 2);
  EXPECT_EQ(mails.size(), 2u);
  for (const auto& m : mails) {
    EXPECT_EQ(m.subject.find("password was changed"), std::string::npos) << m.subject;
  }
}

// The other mailed links prove the mailbox too: a reset or a magic link used on an unproven
// account claims it (the magic link leaves it without a password, to be set with a reset).
TEST_F(AccountsApiTest, PreClaim_AResetOrAMagicLinkAlsoClaimsAnUnprovenAccount) {
  for (const std::string purpose : {"password-reset", "magic-link"}) {
    const std::string email = purpose + "@example.test";
    auto squatter = Browser();
    ASSERT_EQ(squatter
                  ->PostJson("/api/v1/auth/signup",
                             {{"email", email}, {"password", "squatter password 1"}})
                  .status,
              202);
    ASSERT_EQ(squatter
                  ->PostJson("/api/v1/auth/login",
                             {{"email", email}, {"password", "squatter password 1"}})
                  .status,
              200);
    auto owner = Browser();
    ASSERT_EQ(owner->PostJson("/api/v1/auth/" + purpose, {{"email", email}}).status, 202);
    if (purpose == "password-reset") {
      const std::string token = LinkToken(email, "/auth/reset-password");
      ASSERT_EQ(owner
                    ->PostJson("/api/v1/auth/password-reset/consume",
                               {{"token", token}, {"password", "owner password 22"}})
                    .status,
                200);
      ASSERT_EQ(owner
                    ->PostJson("/api/v1/auth/login",
                               {{"email", email}, {"password", "owner password 22"}})
                    .status,
                200);
    } else {
      const std::string token = LinkToken(email, "/auth/magic-link");
      ASSERT_EQ(owner->PostJson("/api/v1/auth/magic-link/consume", {{"token", token}}).status, 200);
      EXPECT_EQ(owner->Get("/api/v1/me").Json()["has_password"], false);
    }
    ExpectProblem(squatter->Get("/api/v1/me"), 401, "unauthenticated");
    ExpectProblem(Browser()->PostJson("/api/v1/auth/login",
                                      {{"email", email}, {"password", "squatter password 1"}}),
                  401, "invalid_credentials");
    EXPECT_EQ(owner->Get("/api/v1/me").Json()["email_proven"], true) << purpose;
    EXPECT_EQ(owner->PostJson("/api/v1/tokens", {{"name", "mine"}}).status, 201) << purpose;
  }
}

// A password reset ends every API token and sign-in of a proven account too (its mailbox's
// owner may be recovering it from someone who had the password).
TEST_F(AccountsApiTest, ResetEndsEveryTokenAndSignIn) {
  auto old_holder = Browser();
  SignUp(*old_holder, "alice@example.test", "old password 123");
  auto made = old_holder->PostJson("/api/v1/tokens", {{"name", "kept"}});
  ASSERT_EQ(made.status, 201) << made.body;
  auto cli = Browser();
  cli->SetBearer(made.Json()["token"]);
  ASSERT_EQ(cli->Get("/api/v1/me").status, 200);

  auto owner = Browser();
  ASSERT_EQ(
      owner->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}}).status,
      202);
  const std::string token = LinkToken("alice@example.test", "/auth/reset-password");
  ASSERT_FALSE(token.empty());
  ASSERT_EQ(owner
                ->PostJson("/api/v1/auth/password-reset/consume",
                           {{"token", token}, {"password", "owner password 22"}})
                .status,
            200);
  ExpectProblem(cli->Get("/api/v1/me"), 401, "unauthenticated");
  ExpectProblem(old_holder->Get("/api/v1/me"), 401, "unauthenticated");
  ExpectProblem(Browser()->PostJson("/api/v1/auth/login", {{"email", "alice@example.test"},
                                                           {"password", "old password 123"}}),
                401, "invalid_credentials");
  ASSERT_EQ(owner
                ->PostJson("/api/v1/auth/login",
                           {{"email", "alice@example.test"}, {"password", "owner password 22"}})
                .status,
            200);
  EXPECT_EQ(owner->Get("/api/v1/tokens").Json()["total"], 0) << "the reset revoked every token";
}

TEST_F(AccountsApiTest, IssuingALinkVoidsOlderLinksOfThatPurpose) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  for (const char* purpose : {"password-reset", "magic-link"}) {
    ASSERT_EQ(
        Browser()
            ->PostJson(std::string("/api/v1/auth/") + purpose, {{"email", "alice@example.test"}})
            .status,
        202);
  }
  const std::string old_reset = LinkToken("alice@example.test", "/auth/reset-password", 1);
  ASSERT_FALSE(old_reset.empty());
  ASSERT_EQ(
      Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}}).status,
      202);
  const std::string new_reset = LinkToken("alice@example.test", "/auth/reset-password", 2);
  ASSERT_FALSE(new_reset.empty());
  ExpectProblem(Browser()->PostJson("/api/v1/auth/password-reset/consume",
                                    {{"token", old_reset}, {"password", "new password 456"}}),
                401, "invalid_link");
  // A newer reset link leaves the magic link alone...
  const std::string magic = LinkToken("alice@example.test", "/auth/magic-link", 1);
  ASSERT_FALSE(magic.empty());
  // ...but using the reset link voids every other outstanding link of the person.
  ASSERT_EQ(Browser()
                ->PostJson("/api/v1/auth/password-reset/consume",
                           {{"token", new_reset}, {"password", "new password 456"}})
                .status,
            200);
  ExpectProblem(Browser()->PostJson("/api/v1/auth/magic-link/consume", {{"token", magic}}), 401,
                "invalid_link");
}

TEST_F(AccountsApiTest, PasswordChangeKeepsThisSignInAndEndsEverythingElse) {
  auto laptop = Browser();
  SignUp(*laptop, "alice@example.test", "old password 123");
  auto phone = Browser();
  ASSERT_EQ(phone
                ->PostJson("/api/v1/auth/login",
                           {{"email", "alice@example.test"}, {"password", "old password 123"}})
                .status,
            200);
  auto cli = Browser();
  cli->SetBearer(laptop->PostJson("/api/v1/tokens", {{"name", "cli"}}).Json()["token"]);
  ASSERT_EQ(cli->Get("/api/v1/me").status, 200);
  ASSERT_EQ(
      Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}}).status,
      202);
  const std::string reset = LinkToken("alice@example.test", "/auth/reset-password");
  ASSERT_FALSE(reset.empty());

  ExpectProblem(laptop->PostJson("/api/v1/me/password", {{"current_password", "not it at all"},
                                                         {"new_password", "new password 456"}}),
                401, "invalid_credentials");
  ExpectProblem(laptop->PostJson("/api/v1/me/password", {{"current_password", "old password 123"},
                                                         {"new_password", "short"}}),
                400, "weak_password");
  auto changed = laptop->PostJson("/api/v1/me/password", {{"current_password", "old password 123"},
                                                          {"new_password", "new password 456"}});
  ASSERT_EQ(changed.status, 200) << changed.body;

  EXPECT_EQ(laptop->Get("/api/v1/me").status, 200) << "the sign-in that changed it stays";
  ExpectProblem(phone->Get("/api/v1/me"), 401, "unauthenticated");
  ExpectProblem(cli->Get("/api/v1/me"), 401, "unauthenticated");
  ExpectProblem(Browser()->PostJson("/api/v1/auth/password-reset/consume",
                                    {{"token", reset}, {"password", "third password 789"}}),
                401, "invalid_link");
  bool noticed = false;
  for (const auto& m : Mails("alice@example.test", 3)) {
    noticed = noticed || m.subject.find("password was changed") != std::string::npos;
  }
  EXPECT_TRUE(noticed) << "the owner is told of the change";
}

TEST_F(AccountsApiTest, ApiTokensMayExpireAndTheirCreationIsMailed) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  const std::string in_an_hour = core::FormatRfc3339(clock_.NowUnix() + 3600);
  auto made = b->PostJson("/api/v1/tokens", {{"name", "ci job"}, {"expires_at", in_an_hour}});
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.Json()["expires_at"], in_an_hour);
  auto forever = b->PostJson("/api/v1/tokens", {{"name", "laptop"}, {"expires_at", nullptr}});
  ASSERT_EQ(forever.status, 201) << forever.body;
  EXPECT_TRUE(forever.Json()["expires_at"].is_null());

  ExpectProblem(
      b->PostJson("/api/v1/tokens",
                  {{"name", "past"}, {"expires_at", core::FormatRfc3339(clock_.NowUnix() - 1)}}),
      400, "invalid_expiry");
  ExpectProblem(b->PostJson("/api/v1/tokens", {{"name", "garbage"}, {"expires_at", "tomorrow"}}),
                400, "invalid_expiry");
  // A new user's trial: a year-9999 expiry took the server down (a time format overflow).
  ExpectProblem(
      b->PostJson("/api/v1/tokens", {{"name", "far"}, {"expires_at", "9999-12-31T23:59:59Z"}}), 400,
      "invalid_expiry");
  EXPECT_EQ(b->Get("/healthz").status, 200);
  EXPECT_EQ(b->Get("/api/v1/tokens").Json()["total"], 2) << "refused tokens are not stored";

  // The notices first: moving the fake clock past the outbox's lease while a mail is being sent
  // would let a second delivery pass claim it again.
  int notices = 0;
  for (const auto& m : Mails("alice@example.test", 2)) {
    if (m.subject.find("API token") == std::string::npos) continue;
    ++notices;
    EXPECT_TRUE(m.text_body.find("ci job") != std::string::npos ||
                m.text_body.find("laptop") != std::string::npos)
        << m.text_body;
  }
  EXPECT_EQ(notices, 2);

  auto ci = Browser();
  ci->SetBearer(made.Json()["token"]);
  auto laptop = Browser();
  laptop->SetBearer(forever.Json()["token"]);
  EXPECT_EQ(ci->Get("/api/v1/me").status, 200);
  clock_.Advance(std::chrono::seconds(3600));
  ExpectProblem(ci->Get("/api/v1/me"), 401, "unauthenticated");
  EXPECT_EQ(laptop->Get("/api/v1/me").status, 200);
}

// GET /api/v1/ssh-keys authenticates and reads its page in one read transaction (Tx::kOneRead):
// the token's use is still recorded, to the minute, and every credential works or fails as on
// any other route.
TEST_F(AccountsApiTest, OneReadRouteAuthenticatesAndRecordsTokenUseOnceAMinute) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  auto created = b->PostJson("/api/v1/tokens", {{"name", "laptop"}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string secret = created.Json()["token"];
  auto last_used = [&] { return b->Get("/api/v1/tokens").Json()["items"][0]["last_used_at"]; };
  EXPECT_TRUE(last_used().is_null());

  auto cli = Browser();
  cli->SetBearer(secret);
  auto keys = cli->Get("/api/v1/ssh-keys");
  ASSERT_EQ(keys.status, 200) << keys.body;
  EXPECT_EQ(keys.Json()["total"], 0);
  const json first = last_used();
  ASSERT_TRUE(first.is_string());
  clock_.Advance(30s);
  ASSERT_EQ(cli->Get("/api/v1/ssh-keys").status, 200);
  EXPECT_EQ(last_used(), first) << "within the minute: no write";
  clock_.Advance(31s);
  ASSERT_EQ(cli->Get("/api/v1/ssh-keys").status, 200);
  EXPECT_NE(last_used(), first) << "a minute later: recorded again";

  EXPECT_EQ(b->Get("/api/v1/ssh-keys").status, 200);  // the sign-in session cookie
  ExpectProblem(cli->Get("/api/v1/ssh-keys?page=0"), 400, "invalid_page");
  auto stranger = Browser();
  ExpectProblem(stranger->Get("/api/v1/ssh-keys"), 401, "unauthenticated");
  stranger->SetBearer("gwt_not-a-token");
  ExpectProblem(stranger->Get("/api/v1/ssh-keys"), 401, "unauthenticated");
  ASSERT_EQ(b->Delete("/api/v1/tokens/" + created.Json()["id"].get<std::string>()).status, 204);
  ExpectProblem(cli->Get("/api/v1/ssh-keys"), 401, "unauthenticated");

  // An expired token is refused here as on every route.
  auto expiring =
      b->PostJson("/api/v1/tokens",
                  {{"name", "ci"}, {"expires_at", core::FormatRfc3339(clock_.NowUnix() + 60)}});
  ASSERT_EQ(expiring.status, 201) << expiring.body;
  cli->SetBearer(expiring.Json()["token"]);
  EXPECT_EQ(cli->Get("/api/v1/ssh-keys").status, 200);
  clock_.Advance(60s);
  ExpectProblem(cli->Get("/api/v1/ssh-keys"), 401, "unauthenticated");
}

TEST_F(AccountsApiTest, BadInputChangesNothing) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  // 5 MiB body: refused before any handler runs.
  std::string huge = R"({"name":"big","public_key":")" + std::string(5 << 20, 'A') + "\"}";
  auto big = b->Post("/api/v1/ssh-keys", huge, "application/json");
  ExpectProblem(big, 413, "payload_too_large");
  auto big_signup = Browser()->Post("/api/v1/auth/signup", huge, "application/json");
  ExpectProblem(big_signup, 413, "payload_too_large");
  // Malformed JSON, wrong types, missing fields.
  ExpectProblem(b->Post("/api/v1/ssh-keys", "{\"name\": ", "application/json"), 400,
                "invalid_json");
  ExpectProblem(b->Post("/api/v1/auth/signup", "[1,2,3]", "application/json"), 400, "invalid_json");
  ExpectProblem(b->PostJson("/api/v1/ssh-keys", {{"name", 7}, {"public_key", "x"}}), 400,
                "invalid_field");
  ExpectProblem(Browser()->PostJson("/api/v1/auth/signup",
                                    {{"email", "not-an-email"}, {"password", "long enough pw"}}),
                400, "invalid_email");
  ExpectProblem(Browser()->PostJson("/api/v1/auth/signup",
                                    {{"email", "bob@example.test"}, {"password", "short"}}),
                400, "weak_password");
  ExpectProblem(b->Get("/api/v1/ssh-keys?page=0"), 400, "invalid_page");
  ExpectProblem(b->Get("/api/v1/nothing-here"), 404, "not_found");
  // Nothing was created by any of it.
  EXPECT_EQ(b->Get("/api/v1/ssh-keys").Json()["total"], 0);
  ExpectProblem(Browser()->PostJson("/api/v1/auth/login", {{"email", "bob@example.test"},
                                                           {"password", "long enough pw"}}),
                401, "invalid_credentials");
}

TEST_F(AccountsApiTest, LinkMailsAreLimitedPerRecipientWithoutTellingTheCaller) {
  // The sign-up's address-proof mail is the first of alice's 5 this hour.
  ASSERT_EQ(Browser()
                ->PostJson("/api/v1/auth/signup",
                           {{"email", "alice@example.test"}, {"password", "correct horse battery"}})
                .status,
            202);
  for (int i = 0; i < 8; ++i) {
    auto r = Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}});
    ASSERT_EQ(r.status, 202) << r.body;
  }
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(
        Browser()->PostJson("/api/v1/auth/magic-link", {{"email", "eve@example.test"}}).status,
        202);
  }
  EXPECT_EQ(Mails("alice@example.test", 5).size(), 5u);
  EXPECT_EQ(Mails("eve@example.test", 5).size(), 5u);
  clock_.Advance(std::chrono::minutes(61));
  ASSERT_EQ(
      Browser()->PostJson("/api/v1/auth/magic-link", {{"email", "alice@example.test"}}).status,
      202);
  EXPECT_EQ(Mails("alice@example.test", 6).size(), 6u);
}

TEST_F(AccountsApiTest, LinkRequestsAndSignUpsAreLimitedPerAddress) {
  for (int i = 0; i < 20; ++i) {
    auto r = Browser()->PostJson("/api/v1/auth/magic-link",
                                 {{"email", "user" + std::to_string(i) + "@example.test"}});
    ASSERT_EQ(r.status, 202) << r.body;
  }
  auto limited = Browser()->PostJson("/api/v1/auth/magic-link", {{"email", "x@example.test"}});
  ExpectProblem(limited, 429, "rate_limited");
  EXPECT_FALSE(limited.Header("retry-after").empty());
  for (int i = 0; i < 30; ++i) {
    auto b = Browser();
    SignUp(*b, "person" + std::to_string(i) + "@example.test");
  }
  ExpectProblem(Browser()->PostJson("/api/v1/auth/signup", {{"email", "one-more@example.test"},
                                                            {"password", "long enough pw"}}),
                429, "rate_limited");
}

TEST_F(AccountsApiTest, BearerSchemeIsCaseInsensitiveAndPasswordsMustBeUtf8) {
  auto b = Browser();
  SignUp(*b, "alice@example.test");
  const std::string secret = b->PostJson("/api/v1/tokens", {{"name", "t"}}).Json()["token"];
  auto cli = Browser();
  EXPECT_EQ(cli->Get("/api/v1/me", {"Authorization: bearer " + secret}).status, 200);
  auto r = Browser()->Post("/api/v1/auth/signup",
                           "{\"email\":\"bob@example.test\",\"password\":\"\xff\xfe"
                           "abcdefgh\"}",
                           "application/json");
  EXPECT_EQ(r.status, 400) << r.body;
  ASSERT_EQ(
      Browser()->PostJson("/api/v1/auth/password-reset", {{"email", "alice@example.test"}}).status,
      202);
  const std::string token = LinkToken("alice@example.test", "/auth/reset-password");
  auto form = Browser()->Post("/auth/reset-password", "token=" + token + "&password=%ff%feabcdefgh",
                              "application/x-www-form-urlencoded");
  EXPECT_EQ(form.status, 400) << form.body;
  EXPECT_NE(form.body.find("UTF-8"), std::string::npos);
}

TEST_F(AccountsApiTest, SecondServerOnTheSameDataDirIsRefused) {
  app::ServerConfig again = config_;
  auto second = app::ServerApp::Start(again, clock_, rng_);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().api_code, "data_dir_in_use");
  EXPECT_NE(second.error().message.find("--data"), std::string::npos);
}

TEST_F(AccountsApiTest, LinkPagesKeepTheOriginForTheirButton) {
  // With "no-referrer" browsers send "Origin: null" on the form POST and the origin check
  // refuses the button; "same-origin" keeps the real origin and still leaks nothing outside.
  auto page = Browser()->Get("/auth/magic-link?token=x");
  EXPECT_NE(page.body.find("content=\"same-origin\""), std::string::npos);
  ExpectProblem(
      Browser()->PostJson("/api/v1/auth/magic-link/consume", {{"token", "x"}}, {"Origin: null"}),
      403, "origin_mismatch");
}

TEST_F(AccountsApiTest, HealthAndMetrics) {
  auto b = Browser();
  auto h = b->Get("/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_FALSE(h.Header("x-request-id").empty());
  b->Get("/api/v1/me");
  auto m = b->Get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("gpuwerk_http_requests_total"), std::string::npos);
  EXPECT_NE(m.body.find("/api/v1/me"), std::string::npos);
  auto home = b->Get("/");
  EXPECT_EQ(home.status, 200);
  EXPECT_NE(home.Header("content-security-policy").find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(b->Get("/home.js").status, 404);  // the pre-dashboard page's script is gone
}

// Issue 11: sign-up open to some email domains only. A refused address gets the same answer
// whether or not it has an account.
class DomainSignUpTest : public ServerTest {
  void Customize(app::ServerConfig& c) override {
    c.sign_up_policy = "domains";
    c.sign_up_domains = {"example.test"};
  }
};

TEST_F(DomainSignUpTest, OnlyTheListedDomainsSignUpAndRefusalsTellNothing) {
  auto alice = Browser();
  SignUp(*alice, "alice@EXAMPLE.test");
  ASSERT_TRUE(app_->EnsureOperator("op@example.test", "operator password 1"));
  auto op = Browser();
  ASSERT_EQ(op->PostJson("/api/v1/auth/login",
                         {{"email", "op@example.test"}, {"password", "operator password 1"}})
                .status,
            200);
  // An operator may invite an address outside the domains: it then has an account.
  ASSERT_EQ(op->PostJson("/api/v1/admin/invites", {{"email", "guest@other.test"}}).status, 201);
  auto stranger = Browser()->PostJson(
      "/api/v1/auth/signup", {{"email", "eve@other.test"}, {"password", "eve password 1"}});
  ExpectProblem(stranger, 403, "signup_domain_not_allowed");
  auto invited = Browser()->PostJson(
      "/api/v1/auth/signup", {{"email", "guest@other.test"}, {"password", "eve password 1"}});
  EXPECT_EQ(invited.status, stranger.status);
  EXPECT_EQ(invited.body, stranger.body);
  ExpectProblem(Browser()->PostJson("/api/v1/auth/signup", {{"email", "bob@lab.example.test"},
                                                            {"password", "bob password 1"}}),
                403, "signup_domain_not_allowed");
  EXPECT_TRUE(Mails("eve@other.test", 0).empty()) << "a refused sign-up mails nothing";
}

// Issue 11: invitation only. Nobody signs up; an operator's invitation link is the address proof.
class InviteOnlyTest : public ServerTest {
  void Customize(app::ServerConfig& c) override { c.sign_up_policy = "invite"; }
};

TEST_F(InviteOnlyTest, OperatorsInviteAndTheLinkMakesTheAccount) {
  auto refused = Browser()->PostJson(
      "/api/v1/auth/signup", {{"email", "carol@example.test"}, {"password", "carol password 1"}});
  ExpectProblem(refused, 403, "signup_invite_only");

  ASSERT_TRUE(app_->EnsureOperator("op@example.test", "operator password 1"));
  auto op = Browser();
  ASSERT_EQ(op->PostJson("/api/v1/auth/login",
                         {{"email", "op@example.test"}, {"password", "operator password 1"}})
                .status,
            200);
  auto invite = op->PostJson("/api/v1/admin/invites", {{"email", "Carol@example.test"}});
  ASSERT_EQ(invite.status, 201) << invite.body;
  EXPECT_EQ(invite.Json()["email"], "Carol@example.test");
  EXPECT_EQ(invite.Json()["expires_at"], core::FormatRfc3339(clock_.NowUnix() + 7 * 86400));
  // Invited or not, sign-up answers alike.
  auto again = Browser()->PostJson(
      "/api/v1/auth/signup", {{"email", "carol@example.test"}, {"password", "carol password 1"}});
  EXPECT_EQ(again.status, refused.status);
  EXPECT_EQ(again.body, refused.body);

  // The invitation link proves the address and sets the password.
  auto carol = Browser();
  const std::string link = LinkToken("carol@example.test", kAddressProofPath);
  ASSERT_FALSE(link.empty());
  ASSERT_EQ(carol
                ->PostJson("/api/v1/auth/prove-address/consume",
                           {{"token", link}, {"password", "carol password 2"}})
                .status,
            200);
  auto me = carol->Get("/api/v1/me").Json();
  EXPECT_EQ(me["email_proven"], true);
  EXPECT_EQ(me["has_password"], true);
  EXPECT_EQ(carol->PostJson("/api/v1/tokens", {{"name", "laptop"}}).status, 201);
  // Only operators invite, and not an address with a proven account.
  ExpectProblem(carol->PostJson("/api/v1/admin/invites", {{"email", "dan@example.test"}}), 403,
                "forbidden");
  ExpectProblem(op->PostJson("/api/v1/admin/invites", {{"email", "carol@example.test"}}), 409,
                "account_exists");
  ExpectProblem(op->PostJson("/api/v1/admin/invites", {{"email", "not an address"}}), 400,
                "invalid_email");

  // An invitation lives 7 days.
  ASSERT_EQ(op->PostJson("/api/v1/admin/invites", {{"email", "dan@example.test"}}).status, 201);
  const std::string late = LinkToken("dan@example.test", kAddressProofPath);
  ASSERT_FALSE(late.empty());
  clock_.Advance(std::chrono::hours(7 * 24));
  ExpectProblem(Browser()->PostJson("/api/v1/auth/prove-address/consume",
                                    {{"token", late}, {"password", "dan password 1"}}),
                401, "invalid_link");
}

// The configured first operator exists once the server is started, i.e. before /healthz
// answers: whoever waits for /healthz can sign in as them (an e2e test signed in between the
// two and got 401 when main made the operator after the server was already serving).
class ConfiguredOperatorTest : public ServerTest {
  void Customize(app::ServerConfig& c) override {
    c.operator_email = "first-operator@example.test";
    c.operator_password = "first operator password";
  }
};

TEST_F(ConfiguredOperatorTest, TheOperatorCanSignInAsSoonAsTheServerAnswers) {
  auto op = Browser();
  auto r = op->PostJson("/api/v1/auth/login", {{"email", "first-operator@example.test"},
                                               {"password", "first operator password"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(op->Get("/api/v1/me").Json()["is_operator"], true);
}

// New-user trial: with two Authorization fields, which one counts was the server's guess (and a
// proxy's or a log's may differ). Two are refused before either is tried: 400, a stable code,
// nothing done; one still works.
TEST_F(AccountsApiTest, TwoAuthorizationHeaderFieldsAre400) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto made = alice->PostJson("/api/v1/tokens", {{"name", "cli"}});
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string token = made.Json()["token"];
  auto client = Browser();
  for (const std::vector<std::string>& fields :
       {std::vector<std::string>{"Authorization: Bearer " + token,
                                 "Authorization: Bearer " + token},
        {"Authorization: Bearer gwt_someone_else", "Authorization: Bearer " + token},
        {"Authorization: Bearer " + token, "authorization: Basic YTpi"}}) {
    auto r = client->Get("/api/v1/me", fields);
    ExpectProblem(r, 400, "duplicate_authorization");
    auto minted = client->Post("/api/v1/tokens", R"({"name":"twice"})", "application/json", fields);
    ExpectProblem(minted, 400, "duplicate_authorization");
  }
  auto tokens = alice->Get("/api/v1/tokens");
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  EXPECT_EQ(tokens.Json()["items"].size(), 1u) << tokens.body;  // nothing was made
  auto one = client->Get("/api/v1/me", {"Authorization: Bearer " + token});
  EXPECT_EQ(one.status, 200) << one.body;
}

}  // namespace
}  // namespace gpuwerk::testing
