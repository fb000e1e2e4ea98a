// Behind a reverse proxy (issue 12 finding 8; issue 11 finding 7): with `trusted_proxies`, each
// client behind the proxy is its own source for every per-source rule, an untrusted peer's
// X-Forwarded-For is ignored, and /metrics still looks at the TCP peer. docs/configuration.md,
// "Behind a reverse proxy".
#include <gtest/gtest.h>

#include "tests/integration/server_fixture.h"

namespace gpuwerk::testing {
namespace {

constexpr const char* kPassword = "correct horse battery";

class TrustedProxyTest : public ServerTest {
 protected:
  // The proxy is 127.0.0.1; 127.0.0.2 is a client that reaches the server directly.
  void Customize(app::ServerConfig& c) override { c.trusted_proxies = {"127.0.0.1"}; }

  HttpResult Login(HttpClient& b, const std::string& password, const std::string& xff) {
    std::vector<std::string> headers;
    if (!xff.empty()) headers.push_back("X-Forwarded-For: " + xff);
    return b.PostJson("/api/v1/auth/login",
                      {{"email", "alice@example.test"}, {"password", password}}, headers);
  }

  int64_t Count(const std::string& sql) {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    return n ? *n : -1;
  }
};

TEST_F(TrustedProxyTest, TwoClientsBehindOneProxyHaveSeparateLockouts) {
  auto owner = Browser();
  SignUp(*owner, "alice@example.test", kPassword);
  auto proxy = Browser();  // one proxy connection pool carries both clients
  // Client A guesses until it is locked out.
  for (int i = 0; i < config_.sign_in_failures_per_account; ++i) {
    ExpectProblem(Login(*proxy, "guess " + std::to_string(i), "198.51.100.1"), 401,
                  "invalid_credentials");
  }
  ExpectProblem(Login(*proxy, kPassword, "198.51.100.1"), 429, "rate_limited");
  // A forged left-most hop does not get A out of its bucket (the proxy appends A's address).
  ExpectProblem(Login(*proxy, kPassword, "198.51.100.2, 198.51.100.1"), 429, "rate_limited");
  // Client B, behind the same proxy, is not locked out.
  auto b = Login(*proxy, kPassword, "198.51.100.2");
  EXPECT_EQ(b.status, 200) << b.body;
  // Nor is a client on IPv6 behind it.
  auto v6 = Login(*proxy, kPassword, "2001:db8::7");
  EXPECT_EQ(v6.status, 200) << v6.body;
  // The audit trail names the clients, not the proxy.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'person.sign_in_failed' AND "
                  "source_address = '198.51.100.1'"),
            config_.sign_in_failures_per_account);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'person.sign_in' AND "
                  "source_address = '198.51.100.2'"),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'person.sign_in' AND "
                  "source_address = '2001:db8::7'"),
            1);
}

TEST_F(TrustedProxyTest, AnUntrustedPeersForwardedForIsIgnored) {
  auto owner = Browser();
  SignUp(*owner, "alice@example.test", kPassword);
  auto direct = Browser();
  direct->SetSourceAddress("127.0.0.2");  // not a trusted proxy
  // Each guess claims another address: all of them count against 127.0.0.2.
  for (int i = 0; i < config_.sign_in_failures_per_account; ++i) {
    ExpectProblem(Login(*direct, "guess " + std::to_string(i), "203.0.113." + std::to_string(i)),
                  401, "invalid_credentials");
  }
  ExpectProblem(Login(*direct, kPassword, "203.0.113.200"), 429, "rate_limited");
  ExpectProblem(Login(*direct, kPassword, ""), 429, "rate_limited");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'person.sign_in_failed' AND "
                  "source_address = '127.0.0.2'"),
            config_.sign_in_failures_per_account);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE source_address LIKE '203.0.113.%'"), 0);
  // Someone behind the proxy is not affected.
  auto proxied = Browser();
  auto ok = Login(*proxied, kPassword, "198.51.100.9");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(TrustedProxyTest, MetricsAreNotFooledByAForwardedLoopbackAddress) {
  // Straight from the proxy's machine, no header: local.
  EXPECT_EQ(Browser()->Get("/metrics").status, 200);
  // Through the trusted proxy, a client naming a loopback address is still not local.
  auto proxied = Browser();
  ExpectProblem(proxied->Get("/metrics", {"X-Forwarded-For: 127.0.0.1"}), 401, "unauthenticated");
  ExpectProblem(proxied->Get("/metrics", {"X-Forwarded-For: ::1"}), 401, "unauthenticated");
  ExpectProblem(proxied->Get("/metrics", {"X-Forwarded-For: 198.51.100.1, 127.0.0.1"}), 401,
                "unauthenticated");
  // An empty field (curl sends "Name;" as an empty header) counts as a proxy too.
  ExpectProblem(proxied->Get("/metrics", {"X-Forwarded-For;"}), 401, "unauthenticated");
}

}  // namespace
}  // namespace gpuwerk::testing
