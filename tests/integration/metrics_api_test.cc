// GET /metrics over real HTTP: for requests straight from this machine and for operators only
// (issue 11, "Caps and cookies"); docs/api.md.
#include <gtest/gtest.h>

#include "tests/integration/server_fixture.h"

namespace gpuwerk::testing {
namespace {

class MetricsApiTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    ASSERT_TRUE(app_->EnsureOperator("op@example.test", "operator password 1"));
  }
  /// A browser signed in as `email`.
  std::unique_ptr<HttpClient> SignedIn(const std::string& email, const std::string& password) {
    auto b = Browser();
    auto in = b->PostJson("/api/v1/auth/login", {{"email", email}, {"password", password}});
    EXPECT_EQ(in.status, 200) << in.body;
    return b;
  }
};

constexpr const char* kProxied = "X-Forwarded-For: 203.0.113.7";

TEST_F(MetricsApiTest, LoopbackCallersReadThemWithoutCredentials) {
  auto anyone = Browser();
  auto m = anyone->Get("/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_NE(m.body.find("# TYPE gpuwerk_http_requests_total counter"), std::string::npos);
}

TEST_F(MetricsApiTest, ProxiedCallersNeedAnOperator) {
  // A reverse proxy on this machine connects from loopback: its clients are not local.
  auto anyone = Browser();
  ExpectProblem(anyone->Get("/metrics", {kProxied}), 401, "unauthenticated");
  ExpectProblem(anyone->Get("/metrics", {"Forwarded: for=203.0.113.7"}), 401, "unauthenticated");

  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto refused = alice->Get("/metrics", {kProxied});
  ExpectProblem(refused, 403, "forbidden");
  EXPECT_EQ(refused.body.find("gpuwerk_http_requests_total"), std::string::npos);

  auto op = SignedIn("op@example.test", "operator password 1");
  auto m = op->Get("/metrics", {kProxied});
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_NE(m.body.find("gpuwerk_http_requests_total{"), std::string::npos) << m.body;
  EXPECT_EQ(anyone->Get("/healthz", {kProxied}).status, 200);  // health stays public
}

// Issue 11 break test (LOW): a proxy on this machine that names its client only in X-Real-IP
// (nginx's `proxy_set_header X-Real-IP $remote_addr`) made an outside client local.
TEST_F(MetricsApiTest, ALoopbackPeerForwardingForAnOutsideAddressNeedsAnOperator) {
  auto anyone = Browser();
  for (const char* field : {"X-Real-IP: 203.0.113.7", "X-Real-IP: 127.0.0.1", "Via: 1.1 proxy.test",
                            "True-Client-IP: 203.0.113.7", "X-Forwarded-Host: gpuwerk.example"}) {
    ExpectProblem(anyone->Get("/metrics", {field}), 401, "unauthenticated");
  }
  auto op = SignedIn("op@example.test", "operator password 1");
  EXPECT_EQ(op->Get("/metrics", {"X-Real-IP: 203.0.113.7"}).status, 200);
  EXPECT_EQ(anyone->Get("/metrics").status, 200);  // straight from this machine it still is local
}

// Issue 11 break test (LOW): GET /metrics and /healthz take no body, like every route without one.
TEST_F(MetricsApiTest, ABodyOnTheOperationalRoutesIsRefused) {
  auto anyone = Browser();
  ExpectProblem(anyone->Send("GET", "/healthz", R"({"x":1})", {"Content-Type: application/json"}),
                400, "invalid_field");
  // Not JSON at all: invalid_json (docs/api.md).
  ExpectProblem(anyone->Send("GET", "/metrics", "junk", {"Content-Type: text/plain"}), 400,
                "invalid_json");
}

}  // namespace
}  // namespace gpuwerk::testing
