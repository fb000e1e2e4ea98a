#include "api/http_types.h"

#include <gtest/gtest.h>

namespace gpuwerk::api {
namespace {

using core::ErrorCode;
using nlohmann::json;

Request JsonRequest(std::string body, std::string content_type = "application/json") {
  Request r;
  r.method = "POST";
  r.path = "/api/v1/x";
  if (!content_type.empty()) r.headers.emplace_back("Content-Type", std::move(content_type));
  r.body = std::move(body);
  return r;
}

TEST(HttpStatusForTest, MapsEveryCode) {
  EXPECT_EQ(HttpStatusFor(ErrorCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kAlreadyExists), 409);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kPaymentRequired), 402);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kPayloadTooLarge), 413);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatusFor(ErrorCode::kInternal), 500);
}

TEST(ProblemTest, IsRfc9457WithCodeAndDetails) {
  core::Error error = core::Error(ErrorCode::kFailedPrecondition, "key_in_use", "key is in use")
                          .WithDetail("instances", json::array({"a", "b"}))
                          .WithDetail("status", 999);  // may not override a standard member
  Response r = Problem(error);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.Header("content-type"), "application/problem+json");
  json body = json::parse(r.body);
  EXPECT_EQ(body["type"], "about:blank");
  EXPECT_EQ(body["title"], "Conflict");
  EXPECT_EQ(body["status"], 409);
  EXPECT_EQ(body["detail"], "key is in use");
  EXPECT_EQ(body["code"], "key_in_use");
  EXPECT_EQ(body["instances"], json::array({"a", "b"}));
}

TEST(ProblemTest, ExplicitStatusOverridesMapping) {
  Response r = Problem(431, core::Error(ErrorCode::kInvalidArgument, "header_too_large", "big"));
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(json::parse(r.body)["title"], "Request Header Fields Too Large");
}

TEST(ResponseTest, FactoriesSetStatusAndContentType) {
  Response j = Response::Json(201, {{"id", "x"}});
  EXPECT_EQ(j.status, 201);
  EXPECT_EQ(j.Header("Content-Type"), "application/json");
  EXPECT_EQ(j.body, R"({"id":"x"})");
  EXPECT_EQ(Response::Html(200, "<p>").Header("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(Response::Text(200, "hi").Header("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(Response::NoContent().status, 204);
  Response redirect = Response::Redirect("/login");
  EXPECT_EQ(redirect.status, 303);
  EXPECT_EQ(redirect.Header("Location"), "/login");
}

TEST(ResponseTest, JsonWithInvalidUtf8DoesNotThrow) {
  Response r = Response::Json(200, {{"name", std::string("a\xff"
                                                         "b")}});
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
}

TEST(ResponseTest, SetHeaderReplacesAddHeaderAppends) {
  Response r;
  r.AddHeader("Set-Cookie", "a=1").AddHeader("Set-Cookie", "b=2");
  EXPECT_EQ(r.headers.size(), 2u);
  r.SetHeader("set-cookie", "c=3");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.Header("Set-Cookie"), "c=3");
}

TEST(RequestTest, HeaderLookupIsCaseInsensitive) {
  Request r;
  r.headers = {{"X-Thing", "1"}, {"x-thing", "2"}};
  EXPECT_EQ(r.Header("x-THING"), "1");
  EXPECT_EQ(r.Header("missing"), "");
}

TEST(RequestTest, CookieParsesPairsAcrossHeaders) {
  Request r;
  r.headers = {{"Cookie", "a=1; gw_session=abc ; q=\"quoted\""}, {"cookie", "late=2"}};
  EXPECT_EQ(r.Cookie("gw_session"), "abc");
  EXPECT_EQ(r.Cookie("q"), "quoted");
  EXPECT_EQ(r.Cookie("late"), "2");
  EXPECT_EQ(r.Cookie("gw"), "");
}

TEST(RequestTest, QueryIntParsesOrDefaultsOrFails) {
  Request r;
  r.query = {{"page", "3"}, {"empty", ""}, {"bad", "3x"}, {"huge", "99999999999999999999"}};
  EXPECT_EQ(r.QueryInt("page", 1).value(), 3);
  EXPECT_EQ(r.QueryInt("absent", 1).value(), 1);
  EXPECT_EQ(r.QueryInt("empty", 7).value(), 7);
  auto bad = r.QueryInt("bad", 1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().api_code, "invalid_query");
  EXPECT_EQ(bad.error().details["parameter"], "bad");
  EXPECT_FALSE(r.QueryInt("huge", 1));
}

TEST(RequestTest, PathParamReturnsEmptyWhenAbsent) {
  Request r;
  r.path_params = {{"id", "key_1"}};
  EXPECT_EQ(r.PathParam("id"), "key_1");
  EXPECT_EQ(r.PathParam("other"), "");
}

TEST(PercentDecodeTest, DecodesAndRejectsMalformed) {
  EXPECT_EQ(PercentDecode("a%20b+c", false), "a b+c");
  EXPECT_EQ(PercentDecode("a%20b+c", true), "a b c");
  EXPECT_EQ(PercentDecode("%2f%2F", false), "//");
  EXPECT_EQ(PercentDecode("%zz", false), std::nullopt);
  EXPECT_EQ(PercentDecode("%2", false), std::nullopt);
  EXPECT_EQ(PercentDecode("%", false), std::nullopt);
}

TEST(ParseQueryTest, DecodesAndKeepsFirstValue) {
  auto q = ParseQuery("page=2&name=a%26b&name=second&flag&&x=1+2");
  ASSERT_TRUE(q);
  EXPECT_EQ((*q)["page"], "2");
  EXPECT_EQ((*q)["name"], "a&b");
  EXPECT_EQ((*q)["flag"], "");
  EXPECT_EQ((*q)["x"], "1 2");
  EXPECT_EQ(ParseQuery("a=%zz"), std::nullopt);
}

// The Host field's and an origin's authority (issue 11 break test: `a b`, `a, b` and an empty
// Host were served).
TEST(ParseHostAndPortTest, ReadsHostNamesAndAddressesWithAnOptionalPort) {
  auto named = ParseHostAndPort("Example.TEST:8443");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->host, "example.test");
  EXPECT_EQ(named->port, 8443);
  auto v6 = ParseHostAndPort("[2001:DB8::1]");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "[2001:db8::1]");
  EXPECT_EQ(v6->port, std::nullopt);
  EXPECT_EQ(ParseHostAndPort("[::1]:1")->port, 1);
  EXPECT_EQ(ParseHostAndPort("127.0.0.1:65535")->port, 65535);
  EXPECT_TRUE(ParseHostAndPort("localhost"));
  EXPECT_TRUE(ParseHostAndPort("a.test."));
  for (std::string_view bad : {"",         " ",         "a b",
                               "a, b",     "a,b",       "a_b",
                               "-a",       "a-",        "u@a",
                               "a/b",      "a?b",       "%61",
                               "a:",       "a:0",       "a:65536",
                               "a:123456", "a:+1",      "a:-1",
                               "a:1x",     ":80",       "::1",
                               "[::1",     "[::1]x",    "[::1]:",
                               "[a.test]", "[1.2.3.4]", "[fe80::1%eth0]",
                               "a\tb",     "a\x01"}) {
    EXPECT_FALSE(ParseHostAndPort(bad)) << "'" << bad << "'";
  }
}

// Issue 11 break test (LOW): a route that takes no body used to ignore one
// (`POST …/drain {"undrain":true}` drained).
TEST(RefuseBodyTest, AllowsNothingOrAnEmptyObjectOnly) {
  EXPECT_TRUE(RefuseBody(JsonRequest("")));
  EXPECT_TRUE(RefuseBody(JsonRequest("{}")));
  EXPECT_TRUE(RefuseBody(JsonRequest(" { } ", "")));
  auto field = RefuseBody(JsonRequest(R"({"undrain":true})"));
  ASSERT_FALSE(field);
  EXPECT_EQ(field.error().api_code, "invalid_field");
  EXPECT_EQ(field.error().details["field"], "undrain");
  for (std::string_view other : {"[]", "null", "0", "\"\""}) {
    auto refused = RefuseBody(JsonRequest(std::string(other)));
    ASSERT_FALSE(refused) << other;
    EXPECT_EQ(refused.error().api_code, "invalid_field") << other;
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << other;
  }
}

// A repeated query parameter (`month=…&month=…`) is named, never silently the first one.
TEST(DuplicateQueryNameTest, NamesTheFirstRepeatedParameter) {
  EXPECT_EQ(DuplicateQueryName("month=2026-01&month=2026-02"), "month");
  EXPECT_EQ(DuplicateQueryName("a=1&b=2&%61=3"), "a");
  EXPECT_EQ(DuplicateQueryName("days=30&utc_offset_minutes=60"), std::nullopt);
  EXPECT_EQ(DuplicateQueryName(""), std::nullopt);
  EXPECT_EQ(DuplicateQueryName("a=1&&b=2"), std::nullopt);
}

// docs/api.md: a body a route refuses is `invalid_json` when it is not JSON at all (`nul`).
TEST(RefuseBodyTest, ABodyThatIsNotJsonIsInvalidJson) {
  for (std::string_view other : {"nul", "x", "{} {}", "token=abc", "{"}) {
    auto refused = RefuseBody(JsonRequest(std::string(other)));
    ASSERT_FALSE(refused) << other;
    EXPECT_EQ(refused.error().api_code, "invalid_json") << other;
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument) << other;
  }
}

TEST(ParseJsonObjectTest, AcceptsAnObject) {
  auto v = ParseJsonObject(JsonRequest(R"({"name":"x"})"), {"name"});
  ASSERT_TRUE(v);
  EXPECT_EQ((*v)["name"], "x");
  EXPECT_TRUE(ParseJsonObject(JsonRequest("{}", "application/json; charset=utf-8"), {"name"}));
  EXPECT_TRUE(ParseJsonObject(JsonRequest("{}", ""), {}));  // no Content-Type
}

TEST(ParseJsonObjectTest, RefusesAnUnknownFieldNamingIt) {
  auto v =
      ParseJsonObject(JsonRequest(R"({"name":"typo","ssh_key_id":"key_1","gpu_typ":"spark-2x"})"),
                      {"name", "ssh_key_id", "gpu_type"});
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(v.error().api_code, "invalid_field");
  EXPECT_EQ(v.error().details["field"], "gpu_typ");
  EXPECT_NE(v.error().message.find("gpu_typ"), std::string::npos) << v.error().message;
  auto none = ParseJsonObject(JsonRequest(R"({"x":1})"), {});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().details["field"], "x");
}

TEST(ParseJsonObjectTest, RefusesADuplicateKeyAtAnyDepth) {
  auto top = ParseJsonObject(JsonRequest(R"({"name":"dupa","name":"dupb"})"), {"name"});
  ASSERT_FALSE(top);
  EXPECT_EQ(top.error().api_code, "invalid_field");
  EXPECT_EQ(top.error().details["field"], "name");
  auto nested = ParseJsonBody(JsonRequest(R"({"hosts":[{"name":"a","rail":"x","name":"b"}]})"));
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().api_code, "invalid_field");
  EXPECT_EQ(nested.error().details["field"], "name");
  // The same key in sibling objects, or in an object and its parent, is no duplicate.
  EXPECT_TRUE(ParseJsonBody(JsonRequest(R"({"name":"a","o":{"name":"b"},"p":[{"name":"c"}]})")));
}

TEST(RefuseUnknownFieldsTest, NamesNestedMembersByPath) {
  json hosts = {{"name", "a"}, {"rail_address", "10.0.0.1"}, {"extra", 1}};
  auto r = RefuseUnknownFields(hosts, {"name", "rail_address"}, "hosts[1].");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "invalid_field");
  EXPECT_EQ(r.error().details["field"], "hosts[1].extra");
  EXPECT_TRUE(RefuseUnknownFields(json::object(), {"name"}));
}

TEST(ParseJsonObjectTest, RejectsEverythingElseAsInvalidJson) {
  for (const Request& r : {JsonRequest("{"), JsonRequest(""), JsonRequest("[1]"),
                           JsonRequest("\"s\""), JsonRequest("{}", "text/plain"),
                           JsonRequest("{\"a\":\"\xff\"}"), JsonRequest("{} trailing")}) {
    auto v = ParseJsonObject(r, {"a"});
    ASSERT_FALSE(v) << r.body;
    EXPECT_EQ(v.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(v.error().api_code, "invalid_json");
  }
}

TEST(ParseJsonObjectTest, SurvivesDeepNesting) {
  std::string deep(100000, '[');
  auto v = ParseJsonObject(JsonRequest(deep), {});
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().api_code, "invalid_json");
}

TEST(RequireStringTest, ChecksPresenceTypeAndLength) {
  json body = {{"name", "gpu"}, {"num", 3}, {"empty", ""}, {"umlaut", "äöü"}, {"nil", nullptr}};
  EXPECT_EQ(RequireString(body, "name", 10).value(), "gpu");
  EXPECT_EQ(RequireString(body, "umlaut", 3).value(), "äöü");  // 3 characters, 6 bytes
  for (auto [field, max] :
       {std::pair{"missing", 10}, {"num", 10}, {"empty", 10}, {"nil", 10}, {"name", 2}}) {
    auto r = RequireString(body, field, max);
    ASSERT_FALSE(r) << field;
    EXPECT_EQ(r.error().api_code, "invalid_field");
    EXPECT_EQ(r.error().details["field"], field);
    EXPECT_NE(r.error().message.find(field), std::string::npos);
  }
}

// The message is shown to people as it is (sign-in, sign-up, invitations, the CLI): in their
// words, the API's field name in `detail.field` only.
TEST(RequireStringTest, MessagesArePeoplesWords) {
  json body = {{"email", ""}, {"password", ""}, {"name", "abcd"}};
  auto email = RequireString(body, "email", 320);
  ASSERT_FALSE(email);
  EXPECT_EQ(email.error().message, "Enter an email address.");
  EXPECT_EQ(email.error().details["field"], "email");
  EXPECT_EQ(RequireString(body, "password", 4096).error().message, "Enter a password.");
  EXPECT_EQ(RequireString(body, "name", 3).error().message,
            "A name can have at most 3 characters.");
}

TEST(OptionalStringTest, MissingIsNullopt) {
  json body = {{"a", "x"}, {"n", 1}};
  EXPECT_EQ(OptionalString(body, "a", 5).value(), "x");
  EXPECT_EQ(OptionalString(body, "b", 5).value(), std::nullopt);
  EXPECT_EQ(OptionalString(body, "n", 5).error().api_code, "invalid_field");
}

TEST(RequireIntTest, ChecksTypeAndRange) {
  json body = {{"n", 5}, {"f", 2.0}, {"half", 2.5}, {"s", "5"}, {"big", 1e30}};
  EXPECT_EQ(RequireInt(body, "n", 1, 10).value(), 5);
  EXPECT_EQ(RequireInt(body, "f", 1, 10).value(), 2);
  EXPECT_FALSE(RequireInt(body, "n", 6, 10));
  EXPECT_FALSE(RequireInt(body, "half", 0, 10));
  EXPECT_FALSE(RequireInt(body, "s", 0, 10));
  EXPECT_FALSE(RequireInt(body, "big", 0, INT64_MAX));
  EXPECT_EQ(RequireInt(body, "missing", 0, 1).error().details["field"], "missing");
}

TEST(RequireBoolTest, OnlyBooleans) {
  json body = {{"t", true}, {"n", 1}};
  EXPECT_TRUE(RequireBool(body, "t").value());
  EXPECT_EQ(RequireBool(body, "n").error().api_code, "invalid_field");
}

}  // namespace
}  // namespace gpuwerk::api
