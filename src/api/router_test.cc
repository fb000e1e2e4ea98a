#include "api/router.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace gpuwerk::api {
namespace {

using nlohmann::json;

Request Req(std::string method, std::string path) {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.target = r.path;
  r.request_id = "req-1";
  return r;
}

/// A handler that answers with the route it was registered as and the path params it got.
Handler Echo(std::string tag) {
  return [tag](Request& r) {
    json params = json::object();
    for (const auto& [k, v] : r.path_params) params[k] = v;
    return Response::Json(200, {{"tag", tag}, {"params", params}, {"route", r.route}});
  };
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.Add("GET", "/api/v1/ssh-keys", Echo("list"), "ssh_keys.list");
    router_.Add("POST", "/api/v1/ssh-keys", Echo("create"));
    router_.Add("DELETE", "/api/v1/ssh-keys/{id}", Echo("delete"));
    router_.Add("GET", "/api/v1/ssh-keys/{id}", Echo("get"));
    router_.Add("GET", "/api/v1/ssh-keys/new", Echo("new"));
    router_.Add("POST", "/api/v1/instances/{id}/restart", Echo("restart"));
    router_.Add("GET", "/assets/{file...}", Echo("asset"));
    router_.Add("GET", "/", Echo("root"));
  }

  json Call(const std::string& method, const std::string& path, int want_status = 200) {
    Request r = Req(method, path);
    Response resp = router_.Dispatch(r);
    EXPECT_EQ(resp.status, want_status) << method << " " << path << ": " << resp.body;
    return resp.body.empty() ? json() : json::parse(resp.body);
  }

  Router router_;
};

TEST_F(RouterTest, MatchesLiteralAndParamSegments) {
  EXPECT_EQ(Call("GET", "/api/v1/ssh-keys")["tag"], "list");
  EXPECT_EQ(Call("POST", "/api/v1/ssh-keys")["tag"], "create");
  json got = Call("GET", "/api/v1/ssh-keys/key_abc");
  EXPECT_EQ(got["tag"], "get");
  EXPECT_EQ(got["params"]["id"], "key_abc");
  json restart = Call("POST", "/api/v1/instances/in_1/restart");
  EXPECT_EQ(restart["params"]["id"], "in_1");
  EXPECT_EQ(Call("GET", "/")["tag"], "root");
}

TEST_F(RouterTest, LiteralBeatsParam) {
  EXPECT_EQ(Call("GET", "/api/v1/ssh-keys/new")["tag"], "new");
  // …but only for its own method: DELETE still reaches the {id} route.
  EXPECT_EQ(Call("DELETE", "/api/v1/ssh-keys/new")["params"]["id"], "new");
}

TEST_F(RouterTest, ParamsArePercentDecoded) {
  EXPECT_EQ(Call("GET", "/api/v1/ssh-keys/a%20b%2Fc")["params"]["id"], "a b/c");
  json bad = Call("GET", "/api/v1/ssh-keys/a%zz", 400);
  EXPECT_EQ(bad["code"], "invalid_path");
}

TEST_F(RouterTest, RestParamTakesTheRemainder) {
  EXPECT_EQ(Call("GET", "/assets/js/app.js")["params"]["file"], "js/app.js");
  EXPECT_EQ(Call("GET", "/assets/")["params"]["file"], "");
}

TEST_F(RouterTest, UnknownPathIs404Problem) {
  for (const char* path : {"/nope", "/api/v1/ssh-keys/", "/api/v1/ssh-keys/a/b", "/api/v1//x"}) {
    Request r = Req("GET", path);
    Response resp = router_.Dispatch(r);
    EXPECT_EQ(resp.status, 404) << path;
    EXPECT_EQ(resp.Header("Content-Type"), "application/problem+json");
    EXPECT_EQ(json::parse(resp.body)["code"], "not_found");
    EXPECT_EQ(r.route, "unmatched");
    EXPECT_EQ(router_.RouteNameFor(r), "unmatched");
  }
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  Request r = Req("PUT", "/api/v1/ssh-keys/key_1");
  Response resp = router_.Dispatch(r);
  EXPECT_EQ(resp.status, 405);
  EXPECT_EQ(resp.Header("Allow"), "DELETE, GET, HEAD");
  json body = json::parse(resp.body);
  EXPECT_EQ(body["code"], "method_not_allowed");
  EXPECT_EQ(body["status"], 405);
  EXPECT_EQ(r.route, "/api/v1/ssh-keys/{id}");
}

TEST_F(RouterTest, HeadFallsBackToGet) {
  json got = Call("HEAD", "/api/v1/ssh-keys/key_1");
  EXPECT_EQ(got["tag"], "get");
  Call("HEAD", "/api/v1/instances/x/restart", 405);
}

TEST_F(RouterTest, RouteNameDefaultsToPattern) {
  EXPECT_EQ(Call("GET", "/api/v1/ssh-keys")["route"], "ssh_keys.list");
  EXPECT_EQ(Call("GET", "/api/v1/ssh-keys/k")["route"], "/api/v1/ssh-keys/{id}");
  Request r = Req("POST", "/api/v1/ssh-keys");
  EXPECT_EQ(router_.RouteNameFor(r), "/api/v1/ssh-keys");
}

TEST(RouterExceptionTest, HandlerExceptionIs500WithoutItsText) {
  Router router;
  router.Add("GET", "/boom", [](Request&) -> Response {
    throw std::runtime_error("secret database password in message");
  });
  router.Add("GET", "/boom2", [](Request&) -> Response { throw 42; });
  for (const char* path : {"/boom", "/boom2"}) {
    Request r = Req("GET", path);
    Response resp = router.Dispatch(r);
    EXPECT_EQ(resp.status, 500);
    EXPECT_EQ(resp.body.find("secret"), std::string::npos);
    json body = json::parse(resp.body);
    EXPECT_EQ(body["code"], "internal");
    EXPECT_EQ(body["request_id"], "req-1");
  }
}

TEST(RouterConcurrencyTest, RoutesCanBeAddedWhileDispatching) {
  Router router;
  router.Add("GET", "/r/0", [](Request&) { return Response::NoContent(); });
  std::thread adder([&] {
    for (int i = 1; i < 300; ++i) {
      router.Add("GET", "/r/" + std::to_string(i), [](Request&) { return Response::NoContent(); });
    }
  });
  int found = 0;
  for (int i = 0; i < 300; ++i) {
    Request r = Req("GET", "/r/0");
    found += router.Dispatch(r).status == 204;
  }
  adder.join();
  EXPECT_EQ(found, 300);
  Request last = Req("GET", "/r/299");
  EXPECT_EQ(router.Dispatch(last).status, 204);
}

TEST(RouterDeathTest, DuplicateRouteAborts) {
  Router router;
  router.Add("GET", "/x/{id}", [](Request&) { return Response::NoContent(); });
  EXPECT_DEATH(router.Add("GET", "/x/{id}", [](Request&) { return Response::NoContent(); }),
               "invariant");
  EXPECT_DEATH(router.Add("GET", "no-slash", [](Request&) { return Response::NoContent(); }),
               "invariant");
  EXPECT_DEATH(router.Add("GET", "/a/{rest...}/b", [](Request&) { return Response::NoContent(); }),
               "invariant");
}

}  // namespace
}  // namespace gpuwerk::api
