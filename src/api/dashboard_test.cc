#include "api/dashboard.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "api/router.h"
#include "api/web_assets.h"

namespace gpuwerk::api {
namespace {

constexpr std::array<WebAsset, 3> kAssets = {{
    {"/index.html", "text/html; charset=utf-8", "<!doctype html><p>app", "GZ-INDEX", "\"i1\"",
     false},
    {"/assets/index-AbCdEf12.js", "text/javascript; charset=utf-8", "console.log(1)", "GZ-JS",
     "\"j1\"", true},
    {"/favicon.svg", "image/svg+xml", "<svg/>", {}, "\"f1\"", false},
}};
constexpr std::array<std::string_view, 2> kPages = {"/", "/sign-in"};

Request Get(std::string path, std::vector<std::pair<std::string, std::string>> headers = {}) {
  Request r;
  r.method = "GET";
  r.path = std::move(path);
  for (auto& [k, v] : headers) r.headers.emplace_back(k, v);
  return r;
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterDashboardRoutes(router_, kAssets, kPages); }
  Response Send(Request req) { return router_.Dispatch(req); }
  Router router_;
};

TEST_F(DashboardTest, EveryPageOfTheAppGetsIndexHtmlRevalidatedEachTime) {
  for (const char* page : {"/", "/sign-in", "/index.html"}) {
    Response r = Send(Get(page));
    EXPECT_EQ(r.status, 200) << page;
    EXPECT_EQ(r.body, "<!doctype html><p>app") << page;
    EXPECT_EQ(r.Header("content-type"), "text/html; charset=utf-8");
    EXPECT_EQ(r.Header("cache-control"), "no-cache");
    EXPECT_EQ(r.Header("etag"), "\"i1\"");
    EXPECT_NE(r.Header("content-security-policy").find("script-src 'self'"), std::string::npos);
    EXPECT_NE(r.Header("content-security-policy").find("frame-ancestors 'none'"),
              std::string::npos);
  }
}

TEST_F(DashboardTest, PathsTheAppDoesNotHaveStayNotFound) {
  for (const char* path : {"/nope", "/sign-in/", "/assets/other.js", "/api/v1/nope"}) {
    Response r = Send(Get(path));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_NE(r.body.find("not_found"), std::string::npos) << path;
  }
}

// A browser's navigation to such a path (Accept: text/html) gets the app, which shows its "no such
// page", still with status 404; nothing under /api/ ever does, nor a POST.
TEST_F(DashboardTest, BrowsersGetTheAppsNotFoundPage) {
  const std::pair<std::string, std::string> html = {"Accept", "text/html,application/xhtml+xml"};
  for (const char* path : {"/nope", "/sign-in/", "/a/b"}) {
    Response r = Send(Get(path, {html}));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.body, "<!doctype html><p>app") << path;
    EXPECT_NE(r.Header("content-security-policy").find("script-src 'self'"), std::string::npos);
  }
  for (const char* path : {"/api/v1/nope", "/api"}) {
    Response r = Send(Get(path, {html}));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_NE(r.body.find("not_found"), std::string::npos) << path;
  }
  Request post = Get("/nope", {html});
  post.method = "POST";
  EXPECT_NE(Send(post).body.find("not_found"), std::string::npos);
}

TEST_F(DashboardTest, HashedAssetsAreImmutableAndOthersRevalidate) {
  Response js = Send(Get("/assets/index-AbCdEf12.js"));
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.body, "console.log(1)");
  EXPECT_EQ(js.Header("cache-control"), "public, max-age=31536000, immutable");
  EXPECT_EQ(js.Header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js.Header("content-security-policy"), "");
  Response svg = Send(Get("/favicon.svg"));
  EXPECT_EQ(svg.Header("cache-control"), "no-cache");
  EXPECT_EQ(svg.Header("vary"), "");  // no gzip copy: one representation
}

TEST_F(DashboardTest, GzipOnlyWhenTheClientAcceptsIt) {
  Response plain = Send(Get("/assets/index-AbCdEf12.js"));
  EXPECT_EQ(plain.Header("content-encoding"), "");
  EXPECT_EQ(plain.Header("vary"), "Accept-Encoding");
  for (const char* accept : {"gzip", "deflate, gzip;q=0.5", "br, *", "GZIP"}) {
    Response gz = Send(Get("/assets/index-AbCdEf12.js", {{"Accept-Encoding", accept}}));
    EXPECT_EQ(gz.body, "GZ-JS") << accept;
    EXPECT_EQ(gz.Header("content-encoding"), "gzip") << accept;
    EXPECT_EQ(gz.Header("etag"), "\"j1-gz\"") << accept;
    EXPECT_EQ(gz.Header("vary"), "Accept-Encoding");
  }
  for (const char* accept : {"gzip;q=0", "identity", "br", "gzip; q=0.0"}) {
    Response r = Send(Get("/assets/index-AbCdEf12.js", {{"Accept-Encoding", accept}}));
    EXPECT_EQ(r.body, "console.log(1)") << accept;
    EXPECT_EQ(r.Header("etag"), "\"j1\"") << accept;
  }
}

TEST_F(DashboardTest, IfNoneMatchAnswers304WithoutABody) {
  for (const char* tag : {"\"i1\"", "W/\"i1\"", "\"x\", \"i1-gz\"", "*"}) {
    Response r = Send(Get("/sign-in", {{"If-None-Match", tag}, {"Accept-Encoding", "gzip"}}));
    EXPECT_EQ(r.status, 304) << tag;
    EXPECT_EQ(r.body, "") << tag;
    EXPECT_EQ(r.Header("etag"), "\"i1-gz\"") << tag;
    EXPECT_EQ(r.Header("cache-control"), "no-cache");
  }
  Response changed = Send(Get("/", {{"If-None-Match", "\"old\""}}));
  EXPECT_EQ(changed.status, 200);
}

// The table this binary was built with: index.html, every page of web/src/routes.json, and
// content-hashed assets only under /assets/.
TEST(WebAssetsTest, TheEmbeddedBuildIsComplete) {
  bool index = false;
  for (const WebAsset& a : WebAssets()) {
    EXPECT_TRUE(a.path.starts_with("/")) << a.path;
    EXPECT_FALSE(a.body.empty()) << a.path;
    EXPECT_FALSE(a.content_type.empty()) << a.path;
    EXPECT_TRUE(a.etag.starts_with("\"") && a.etag.ends_with("\"")) << a.path;
    if (a.immutable) {
      EXPECT_TRUE(a.path.starts_with("/assets/")) << a.path;
    }
    if (a.path == "/index.html") {
      index = true;
      EXPECT_FALSE(a.immutable);
    }
  }
  EXPECT_TRUE(index);
  bool root = false;
  bool team_accept = false;
  for (std::string_view page : DashboardPages()) {
    root = root || page == "/";
    team_accept = team_accept || page == "/team/accept";
  }
  EXPECT_TRUE(root);
  if (DashboardBuilt()) {
    EXPECT_GT(WebAssets().size(), 2u) << "the app's script and stylesheet";
    // The invitation mail's link (src/teams/team_service.cc) opens the app's page.
    EXPECT_TRUE(team_accept);
  }
}

}  // namespace
}  // namespace gpuwerk::api
