#include "protocol/api_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/fake_api_server.h"
#include "protocol/sse_parser.h"

namespace gpuwerk::protocol {
namespace {

using cli::FakeApiServer;
using cli::FakeRequest;
using cli::FakeResponse;

using core::ErrorCode;
using nlohmann::json;

/// A loopback port with nothing listening on it (bound, then closed).
int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(ErrorFromResponseTest, TakesCodeAndDetailFromProblemJson) {
  ApiResponse r{.status = 409,
                .body = {{"type", "about:blank"},
                         {"title", "Conflict"},
                         {"status", 409},
                         {"detail", "The key is in use by instance a."},
                         {"code", "key_in_use"},
                         {"instances", json::array({"a"})}}};
  core::Error e = ErrorFromResponse(r);
  EXPECT_EQ(e.code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(e.api_code, "key_in_use");
  EXPECT_EQ(e.message, "The key is in use by instance a.");
  EXPECT_EQ(e.details, json({{"instances", json::array({"a"})}}));
}

TEST(ErrorFromResponseTest, FallsBackForBodiesThatAreNotProblems) {
  core::Error e = ErrorFromResponse(ApiResponse{.status = 502, .text = "<html>"});
  EXPECT_EQ(e.code, ErrorCode::kInternal);
  EXPECT_EQ(e.api_code, "http_502");
  EXPECT_EQ(e.message, "the server answered HTTP 502 with a body that is not JSON");
}

TEST(ErrorCodeForStatusTest, InvertsTheServersMapping) {
  EXPECT_EQ(ErrorCodeForStatus(400), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ErrorCodeForStatus(401), ErrorCode::kUnauthenticated);
  EXPECT_EQ(ErrorCodeForStatus(402), ErrorCode::kPaymentRequired);
  EXPECT_EQ(ErrorCodeForStatus(403), ErrorCode::kPermissionDenied);
  EXPECT_EQ(ErrorCodeForStatus(404), ErrorCode::kNotFound);
  EXPECT_EQ(ErrorCodeForStatus(409, "name_taken"), ErrorCode::kAlreadyExists);
  EXPECT_EQ(ErrorCodeForStatus(409, "already_queued"), ErrorCode::kAlreadyExists);
  EXPECT_EQ(ErrorCodeForStatus(409, "key_in_use"), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(ErrorCodeForStatus(413), ErrorCode::kPayloadTooLarge);
  EXPECT_EQ(ErrorCodeForStatus(429), ErrorCode::kResourceExhausted);
  EXPECT_EQ(ErrorCodeForStatus(503), ErrorCode::kUnavailable);
  EXPECT_EQ(ErrorCodeForStatus(504), ErrorCode::kDeadlineExceeded);
  EXPECT_EQ(ErrorCodeForStatus(418), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ErrorCodeForStatus(500), ErrorCode::kInternal);
}

TEST(PathEscapeTest, KeepsUnreservedAndEncodesTheRest) {
  EXPECT_EQ(PathEscape("key_AZ09-.~"), "key_AZ09-.~");
  EXPECT_EQ(PathEscape("../a b/?#"), "..%2Fa%20b%2F%3F%23");
}

TEST(ApiClientTest, SendsBearerTokenJsonBodyAndCookie) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse{
        201,
        R"({"ok":true})",
        {{"Set-Cookie", "gpuwerk_session=abc; Path=/; HttpOnly"}, {"Set-Cookie", "other=1"}}};
  });
  ApiClient client(server.url() + "/", "gwt_secret");
  client.SetCookie("gpuwerk_session=xyz");
  const json body = {{"name", "laptop"}};
  auto r = client.Call("POST", "/api/v1/ssh-keys", &body);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, json({{"ok", true}}));
  EXPECT_EQ(r->set_cookies,
            (std::vector<std::string>{"gpuwerk_session=abc; Path=/; HttpOnly", "other=1"}));

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].target, "/api/v1/ssh-keys");
  EXPECT_EQ(reqs[0].Header("authorization"), "Bearer gwt_secret");
  EXPECT_EQ(reqs[0].Header("cookie"), "gpuwerk_session=xyz");
  EXPECT_EQ(reqs[0].Header("content-type"), "application/json");
  EXPECT_EQ(reqs[0].Header("origin"), "");
  EXPECT_EQ(reqs[0].Json(), body);
}

TEST(ApiClientTest, BarePostAndDeleteSendNoBodyOrTokenWhenNoneIsSet) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse::NoContent(); });
  ApiClient client(server.url(), "");
  auto post = client.Call("POST", "/api/v1/auth/logout");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 204);
  EXPECT_TRUE(post->body.is_null());
  auto del = client.CallOk("DELETE", "/api/v1/tokens/tok_1");
  ASSERT_TRUE(del);
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].body, "");
  EXPECT_EQ(reqs[0].Header("content-type"), "");
  EXPECT_EQ(reqs[0].Header("authorization"), "");
  EXPECT_EQ(reqs[1].method, "DELETE");
}

TEST(ApiClientTest, CallOkTurnsProblemsIntoErrors) {
  FakeApiServer server([](const FakeRequest&) {
    return FakeResponse::Problem(400, "invalid_public_key", "The key is not valid.");
  });
  ApiClient client(server.url(), "t");
  auto r = client.CallOk("GET", "/api/v1/ssh-keys");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().api_code, "invalid_public_key");
  EXPECT_EQ(r.error().message, "The key is not valid.");
}

TEST(ApiClientTest, CallOkRefusesAnAnswerThatIsNotJson) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse{200, "<html>", {}}; });
  auto r = ApiClient(server.url(), "t").CallOk("GET", "/api/v1/me");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "unexpected_response");
}

TEST(ApiClientTest, GetAllPagesFollowsPages) {
  FakeApiServer server([](const FakeRequest& req) {
    const int page = req.query == "x=1&page=2" ? 2 : req.query == "x=1&page=3" ? 3 : 1;
    json items = json::array();
    if (page < 3)
      items = {{{"n", page * 10}}, {{"n", page * 10 + 1}}};
    else
      items = {{{"n", 30}}};
    return FakeResponse::Json(200, {{"items", items}, {"page", page}, {"pages", 3}, {"total", 5}});
  });
  auto all = ApiClient(server.url(), "t").GetAllPages("/api/v1/things?x=1");
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(*all, json::parse(R"([{"n":10},{"n":11},{"n":20},{"n":21},{"n":30}])"));
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].target, "/api/v1/things?x=1&page=1");
  EXPECT_EQ(reqs[2].target, "/api/v1/things?x=1&page=3");
}

TEST(ApiClientTest, GetAllPagesRefusesSomethingThatIsNotAPage) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse::Json(200, {{"a", 1}}); });
  auto all = ApiClient(server.url(), "t").GetAllPages("/api/v1/things");
  ASSERT_FALSE(all);
  EXPECT_EQ(all.error().api_code, "unexpected_response");
}

TEST(ApiClientTest, UnreachableServerSaysSoAndHowToFixIt) {
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort());
  auto r = ApiClient(url, "t").Call("GET", "/api/v1/me");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().api_code, "server_unreachable");
  EXPECT_TRUE(r.error().message.starts_with("cannot reach the gpuwerk server at " + url + ": "))
      << r.error().message;
  EXPECT_TRUE(r.error().message.ends_with(
      ". Is it running? Set GPUWERK_URL or run 'gpuwerk login --url URL'"))
      << r.error().message;
}

TEST(ErrorCodeForStatusTest, ConflictCodesAreLookedUpNotGuessed) {
  for (const char* code : {"name_taken", "email_taken", "key_exists", "key_taken", "already_exists",
                           "already_queued", "already_paired"}) {
    EXPECT_TRUE(IsAlreadyExistsCode(code)) << code;
    EXPECT_EQ(ErrorCodeForStatus(409, code), ErrorCode::kAlreadyExists) << code;
  }
  // A code that merely looks like one is a failed precondition.
  EXPECT_EQ(ErrorCodeForStatus(409, "thing_taken"), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(ErrorCodeForStatus(409, "already_whatever"), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(ErrorCodeForStatus(409, "no_capacity"), ErrorCode::kFailedPrecondition);
}

TEST(ErrorFromResponseTest, JsonThatIsNotAProblemIsAnHttpError) {
  core::Error e = ErrorFromResponse(ApiResponse{.status = 404, .body = {{"code", "not_found"}}});
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  EXPECT_EQ(e.api_code, "http_404");
  EXPECT_EQ(e.message, "the server answered HTTP 404 without an explanation");
}

TEST(ApiClientTest, UserAgentHintAndPerCallTimeoutAreSettable) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse::NoContent(); });
  ApiClient client(server.url(), "");
  client.SetUserAgent("gpuwerk-agent");
  ASSERT_TRUE(client.Call("GET", "/x", nullptr, {}, std::chrono::seconds(3)));
  EXPECT_EQ(server.requests().at(0).Header("user-agent"), "gpuwerk-agent");

  ApiClient unreachable = ApiClient::ForService("http://127.0.0.1:" + std::to_string(ClosedPort()),
                                                "", "gpuwerk-relay", std::chrono::seconds(2));
  auto r = unreachable.Call("GET", "/x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "server_unreachable");
  EXPECT_EQ(r.error().message.find("Is it running"), std::string::npos) << r.error().message;
  EXPECT_TRUE(r.error().details.contains("reason"));
}

TEST(ApiClientTest, ACancelledClientSendsNothing) {
  FakeApiServer server([](const FakeRequest&) { return FakeResponse::NoContent(); });
  std::atomic<bool> cancelled{true};
  ApiClient client(server.url(), "t");
  client.SetCancelFlag(&cancelled);
  auto r = client.Call("GET", "/api/v1/agent/watch");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_TRUE(server.requests().empty());
  cancelled = false;
  EXPECT_TRUE(client.Call("GET", "/api/v1/agent/watch"));
}

// --- ApiClient::Stream and SseParser (gpuwerk events) ----------------------------------------

TEST(ApiClientStreamTest, HandsOverTheBodyAndStopsWhenTheSinkSaysSo) {
  FakeApiServer server([](const FakeRequest& req) {
    EXPECT_EQ(req.Header("authorization"), "Bearer gwt_t");
    EXPECT_EQ(req.Header("accept"), "text/event-stream");
    return FakeResponse{200, "id: 1\nevent: snapshot\ndata: {}\n\n", {}};
  });
  std::string got;
  auto end = ApiClient(server.url(), "gwt_t")
                 .Stream(
                     "/api/v1/events", {"Accept: text/event-stream"},
                     [&](std::string_view bytes) {
                       got += bytes;
                       return true;
                     },
                     std::chrono::seconds(5));
  ASSERT_TRUE(end) << end.error().message;
  EXPECT_EQ(end->response.status, 200);
  EXPECT_FALSE(end->stopped);
  EXPECT_EQ(got, "id: 1\nevent: snapshot\ndata: {}\n\n");

  auto stopped = ApiClient(server.url(), "gwt_t")
                     .Stream(
                         "/api/v1/events", {"Accept: text/event-stream"},
                         [](std::string_view) { return false; }, std::chrono::seconds(5));
  ASSERT_TRUE(stopped);
  EXPECT_TRUE(stopped->stopped);
}

TEST(ApiClientStreamTest, AnErrorAnswerComesBackWithItsProblem) {
  FakeApiServer server(
      [](const FakeRequest&) { return FakeResponse::Problem(429, "rate_limited", "Too many."); });
  bool called = false;
  auto end = ApiClient(server.url(), "gwt_t")
                 .Stream(
                     "/api/v1/events", {},
                     [&](std::string_view) {
                       called = true;
                       return true;
                     },
                     std::chrono::seconds(5));
  ASSERT_TRUE(end);
  EXPECT_FALSE(called);
  EXPECT_EQ(end->response.status, 429);
  EXPECT_EQ(ErrorFromResponse(end->response).api_code, "rate_limited");
}

TEST(ApiClientStreamTest, UnreachableServerIsServerUnreachable) {
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort());
  auto end = ApiClient(url, "t").Stream(
      "/api/v1/events", {}, [](std::string_view) { return true; }, std::chrono::seconds(5));
  ASSERT_FALSE(end);
  EXPECT_EQ(end.error().api_code, "server_unreachable");
}

TEST(SseParserTest, ParsesEventsAcrossArbitrarySplits) {
  const std::string stream =
      "\xEF\xBB\xBFretry: 3000\n\n"
      ": keep-alive\n\n"
      "id: 1\nevent: snapshot\ndata: {\"a\":1}\n\n"
      "id: 2\r\nevent: instance\r\ndata: line one\r\ndata: line two\r\n\r\n"
      "data:no space\rdata\r\r"
      "event: ignored-without-data\n\n"
      "id: 3\ndata: last\n\n";
  // Fed whole, byte by byte, and in every two-piece split: the same events.
  std::vector<std::vector<std::string>> splits;
  splits.push_back({stream});
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  splits.push_back(bytes);
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    splits.push_back({stream.substr(0, cut), stream.substr(cut)});
  }
  for (const auto& pieces : splits) {
    SseParser parser;
    std::vector<ServerSentEvent> events;
    for (const auto& piece : pieces) {
      for (auto& e : parser.Feed(piece)) events.push_back(std::move(e));
    }
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[0].type, "snapshot");
    EXPECT_EQ(events[0].id, "1");
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[1].type, "instance");
    EXPECT_EQ(events[1].id, "2");
    EXPECT_EQ(events[1].data, "line one\nline two");
    EXPECT_EQ(events[2].type, "message");
    EXPECT_EQ(events[2].id, "2");  // the last event ID carries over
    EXPECT_EQ(events[2].data, "no space\n");
    EXPECT_EQ(events[3].id, "3");
    EXPECT_EQ(events[3].data, "last");
    EXPECT_EQ(parser.retry_ms(), 3000);
    EXPECT_EQ(parser.comments(), 1);
  }
}

TEST(SseParserTest, IgnoresBadRetryAndIdsWithNul) {
  SseParser parser;
  auto events = parser.Feed(std::string("retry: 12a\nid: x\0y\ndata: d\n\n", 28));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].id, "");
  EXPECT_EQ(parser.retry_ms(), -1);
}

// Issue 12 finding 8: an agent's or relay's token crosses a network only inside TLS.
TEST(CheckCredentialUrlTest, HttpsAnywhereAndHttpOnlyToLoopback) {
  for (const char* ok :
       {"https://gpu.example.com", "https://10.0.0.5:8443/", "http://127.0.0.1:8080",
        "http://127.1.2.3", "http://localhost:9/", "http://LOCALHOST", "http://[::1]:8080"}) {
    EXPECT_TRUE(CheckCredentialUrl(ok)) << ok;
  }
  for (const char* insecure :
       {"http://gpu.example.com", "http://10.0.0.5:8080", "http://[::ffff:127.0.0.1]:80",
        "http://localhost.example.com", "http://0.0.0.0:8080", "http://128.0.0.1"}) {
    auto r = CheckCredentialUrl(insecure);
    ASSERT_FALSE(r) << insecure;
    EXPECT_EQ(r.error().api_code, "insecure_server_url") << insecure;
    EXPECT_NE(r.error().message.find("https://"), std::string::npos);
  }
  for (const char* invalid :
       {"", "gpu.example.com", "ftp://gpu.example.com", "https://",
        "https://user:pw@gpu.example.com", "file:///etc/passwd", "http://127.0.0.1\n:80"}) {
    auto r = CheckCredentialUrl(invalid);
    ASSERT_FALSE(r) << invalid;
    EXPECT_EQ(r.error().api_code, "invalid_server_url") << invalid;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);  // outside text escaped
  }
}

}  // namespace
}  // namespace gpuwerk::protocol
