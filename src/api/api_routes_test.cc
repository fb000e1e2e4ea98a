#include "api/api_routes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

namespace gpuwerk::api {
namespace {

/// The access level a route promises (docs/api.md): operators under /api/v1/admin/, host
/// agents under /api/v1/agent/, relays under /api/v1/relay/, anyone for sign-in, the link pages
/// (the invitation link's page /team/accept included), a person with a proven
/// address for what costs or grants access (launch, restart, joining a queue, making an API token,
/// adding an SSH key, setting up a card) and for changing the password (which voids the mailbox
/// owner's links and mails them; docs/accounts.md) and for making, inviting to and joining a team
/// (docs/teams.md), a signed-in person for the rest of /api/v1.
Access ExpectedAccess(std::string_view method, std::string_view pattern) {
  static const std::set<std::pair<std::string_view, std::string_view>> kNeedsProvenAddress = {
      {"POST", "/api/v1/instances"},
      {"POST", "/api/v1/instances/{id}/restart"},
      {"POST", "/api/v1/queue-entries"},
      {"POST", "/api/v1/tokens"},
      {"POST", "/api/v1/ssh-keys"},
      {"POST", "/api/v1/me/password"},
      {"POST", "/api/v1/ssh-keys/claim-challenge"},
      {"POST", "/api/v1/ssh-keys/claim"},
      {"POST", "/api/v1/billing/card-setup"},
      {"POST", "/api/v1/team"},
      {"POST", "/api/v1/team/invites"},
      {"POST", "/api/v1/team/invites/accept"},
  };
  if (kNeedsProvenAddress.contains({method, pattern})) return Access::kProvenPerson;
  if (pattern.starts_with("/api/v1/admin/")) return Access::kOperator;
  if (pattern.starts_with("/api/v1/agent/")) return Access::kAgent;
  if (pattern.starts_with("/api/v1/relay/")) return Access::kRelay;
  if (pattern.starts_with("/api/v1/auth/") || pattern.starts_with("/auth/") ||
      pattern == "/api/v1/team/invites/preview" || pattern == "/api/v1/billing/webhooks/stripe") {
    return Access::kPublic;
  }
  return Access::kPerson;
}

TEST(ApiRoutesTest, EveryRouteHasAHandlerAndIsListedOnce) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const ApiRoute& route : ApiRoutes()) {
    EXPECT_NE(route.handler, nullptr) << route.method << " " << route.pattern;
    EXPECT_TRUE(seen.emplace(route.method, route.pattern).second)
        << "listed twice: " << route.method << " " << route.pattern;
  }
  EXPECT_EQ(seen.size(), ApiRoutes().size());
}

TEST(ApiRoutesTest, AccessFollowsThePathPrefix) {
  for (const ApiRoute& route : ApiRoutes()) {
    EXPECT_EQ(route.access, ExpectedAccess(route.method, route.pattern))
        << route.method << " " << route.pattern;
  }
}

// /metrics is for loopback peers (issue 11 finding 7): the TCP peer decides, never the client
// address a trusted proxy's X-Forwarded-For names (issue 12 finding 8).
TEST(ApiRoutesTest, MetricsLoopbackRuleLooksAtTheTcpPeer) {
  Request local;
  local.peer_address = "127.0.0.1";
  local.remote_address = "127.0.0.1";
  EXPECT_TRUE(IsStraightFromThisMachine(local));
  local.peer_address = "::1";
  EXPECT_TRUE(IsStraightFromThisMachine(local));
  local.peer_address = "::ffff:127.0.0.1";
  EXPECT_TRUE(IsStraightFromThisMachine(local));

  Request forwarded;  // a proxy elsewhere said the client is 127.0.0.1
  forwarded.peer_address = "203.0.113.7";
  forwarded.remote_address = "127.0.0.1";
  EXPECT_FALSE(IsStraightFromThisMachine(forwarded));
  forwarded.remote_address = "::1";
  EXPECT_FALSE(IsStraightFromThisMachine(forwarded));

  Request unknown;  // no peer: never local
  unknown.remote_address = "127.0.0.1";
  EXPECT_FALSE(IsStraightFromThisMachine(unknown));

  // Issue 11 break test (LOW): a loopback peer with only X-Real-IP (nginx's default client
  // field) was local; every field a proxy adds to name its client now says it is not.
  for (const char* name : {"X-Forwarded-For", "x-forwarded-for", "Forwarded", "X-Real-IP",
                           "x-real-ip", "Via", "X-Forwarded-Host", "X-Forwarded-Proto",
                           "X-Client-IP", "Client-IP", "True-Client-IP", "CF-Connecting-IP",
                           "Fastly-Client-IP", "X-Cluster-Client-IP", "X-Original-Forwarded-For"}) {
    Request proxied = local;
    proxied.peer_address = "127.0.0.1";
    proxied.headers.emplace_back(name, "");
    EXPECT_FALSE(IsStraightFromThisMachine(proxied)) << name;
  }
}

// A trusted proxy on this machine naming a loopback client is judged by both addresses: the
// client address an outside proxy chain names never makes a request local.
TEST(ApiRoutesTest, MetricsLoopbackRuleNeedsALoopbackClientToo) {
  Request request;
  request.peer_address = "127.0.0.1";
  request.remote_address = "198.51.100.7";
  EXPECT_FALSE(IsStraightFromThisMachine(request));
  request.headers.emplace_back("X-Request-Id", "abc");  // not a forwarding field
  request.remote_address = "127.0.0.1";
  EXPECT_TRUE(IsStraightFromThisMachine(request));
}

// Issue 11 break test (LOW): POSTs (and the PUT of the operator flag) that only act take no body,
// like every GET and DELETE.
TEST(ApiRoutesTest, RoutesThatOnlyActTakeNoBody) {
  static const std::set<std::pair<std::string_view, std::string_view>> kPostsWithoutBody = {
      {"POST", "/api/v1/auth/logout"},
      {"POST", "/api/v1/instances/{id}/restart"},
      {"POST", "/api/v1/admin/hosts/{name}/drain"},
      {"POST", "/api/v1/admin/hosts/{name}/undrain"},
      {"POST", "/api/v1/billing/card-setup"},
      {"POST", "/api/v1/team/leave"},
      {"PUT", "/api/v1/admin/people/{email}/operator"},
  };
  for (const ApiRoute& route : ApiRoutes()) {
    const bool bodiless_method =
        route.method == "GET" || route.method == "HEAD" || route.method == "DELETE";
    EXPECT_EQ(TakesNoBody(route),
              bodiless_method || kPostsWithoutBody.contains({route.method, route.pattern}))
        << route.method << " " << route.pattern;
  }
}

}  // namespace
}  // namespace gpuwerk::api
