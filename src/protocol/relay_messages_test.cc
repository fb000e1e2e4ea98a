#include "protocol/relay_messages.h"

#include <gtest/gtest.h>

#include "core/strings.h"
#include "protocol/testing/strict_fields.h"

namespace gpuwerk::protocol {
namespace {

using nlohmann::json;
using testing::ExpectStrict;

RelayTarget SampleTarget() {
  return {.instance_id = "ins_1",
          .instance_name = "alpha",
          .hostname = "alpha-k3x7q",
          .upstream_host = "127.0.0.1",
          .upstream_port = 40123,
          .login = "root",
          .person_id = "per_1",
          .upstream_host_key_fingerprint = "SHA256:abc"};
}

RelaySessionReport SampleReport() {
  return {.relay = "relay-1",
          .person_id = "per_1",
          .key_fingerprint = "SHA256:key",
          .instance_id = "ins_1",
          .hostname = "alpha-k3x7q",
          .login = "root",
          .source_address = "192.0.2.7",
          .started_at = "2026-01-02T03:04:05Z",
          .ended_at = "2026-01-02T03:05:05Z",
          .bytes_from_client = 10,
          .bytes_to_client = 20,
          .end_reason = "client closed"};
}

TEST(RelayAuthorizeRequestTest, RoundTripsAndIsStrict) {
  const RelayAuthorizeRequest r{.user = "alpha-k3x7q",
                                .key_type = "ssh-ed25519",
                                .public_key = "AAAA",
                                .fingerprint = "SHA256:x",
                                .source_address = "192.0.2.1"};
  const json j = ToJson(r);
  EXPECT_EQ(j, json({{"user", "alpha-k3x7q"},
                     {"key_type", "ssh-ed25519"},
                     {"public_key", "AAAA"},
                     {"fingerprint", "SHA256:x"},
                     {"source_address", "192.0.2.1"}}));
  EXPECT_EQ(RelayAuthorizeRequestFromJson(j).value(), r);
  ExpectStrict(j, RelayAuthorizeRequestFromJson);
}

TEST(RelayAuthorizeDecisionTest, AllowRoundTripsAndIsStrict) {
  const auto allow = RelayAuthorizeDecision::Allow(SampleTarget());
  const json j = ToJson(allow);
  EXPECT_EQ(j["decision"], "allow");
  EXPECT_EQ(j["target"]["upstream"], json({{"host", "127.0.0.1"}, {"port", 40123}}));
  EXPECT_EQ(RelayAuthorizeDecisionFromJson(j).value(), allow);
  ExpectStrict(j, RelayAuthorizeDecisionFromJson);
}

TEST(RelayAuthorizeDecisionTest, RefuseRoundTripsAndIsStrict) {
  const auto refuse = RelayAuthorizeDecision::Refuse("gpuwerk: no such instance");
  const json j = ToJson(refuse);
  EXPECT_EQ(j, json({{"decision", "refuse"},
                     {"code", "not_authorized"},
                     {"message", "gpuwerk: no such instance"}}));
  EXPECT_EQ(RelayAuthorizeDecisionFromJson(j).value(), refuse);
  ExpectStrict(j, RelayAuthorizeDecisionFromJson);
}

TEST(RelayAuthorizeDecisionTest, RefusesAnotherDecisionAndABadPort) {
  auto other = RelayAuthorizeDecisionFromJson({{"decision", "maybe"}});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().details["field"], "decision");
  json j = ToJson(RelayAuthorizeDecision::Allow(SampleTarget()));
  j["target"]["upstream"]["port"] = 65536;
  auto port = RelayAuthorizeDecisionFromJson(j);
  ASSERT_FALSE(port);
  EXPECT_EQ(port.error().details["field"], "target.upstream.port");
}

RelayRefusalReport SampleRefusals() {
  return {.refusals = {{.code = "upstream_host_key_mismatch",
                        .user = "alpha-k3x7q",
                        .key_fingerprint = "SHA256:key",
                        .person_id = "per_1",
                        .instance_id = "ins_1",
                        .source_address = "192.0.2.7",
                        .expected_host_key = "SHA256:old",
                        .presented_host_key = "SHA256:new",
                        .count = 3,
                        .first_at = "2027-01-14T09:00:00Z",
                        .last_at = "2027-01-14T09:00:40Z"}},
          .dropped = 7};
}

TEST(RelayRefusalReportTest, RoundTripsAndIsStrictAndBounded) {
  const RelayRefusalReport report = SampleRefusals();
  EXPECT_EQ(RelayRefusalReportFromJson(ToJson(report)).value(), report);
  ExpectStrict(ToJson(report), RelayRefusalReportFromJson);
  for (auto [field, value] : {std::pair<std::string, json>{"code", ""},
                              {"user", std::string(513, 'u')},
                              {"instance_id", std::string(257, 'i')},
                              {"count", 0},
                              {"count", 1'000'001},
                              {"first_at", ""}}) {
    json j = ToJson(report);
    j["refusals"][0][field] = value;
    EXPECT_FALSE(RelayRefusalReportFromJson(j)) << field << " " << value;
  }
  json j = ToJson(report);
  j["dropped"] = -1;
  EXPECT_FALSE(RelayRefusalReportFromJson(j));
  j = ToJson(report);
  for (size_t i = 0; i < kMaxRefusalGroups; ++i) j["refusals"].push_back(j["refusals"][0]);
  auto too_many = RelayRefusalReportFromJson(j);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().api_code, "invalid_field");
}

// The user name is escaped once, by the relay; the server keeps it as it is, so a report whose
// `user` is not in that form (raw controls, a direction mark, a bare quote) is refused.
TEST(RelayRefusalReportTest, UserMustBeInTheRelaysBoundedPrintableForm) {
  const std::string escaped = core::BoundedPrintable("x\x1b[31mEVIL\u202e");
  json j = ToJson(SampleRefusals());
  j["refusals"][0]["user"] = escaped;
  auto kept = RelayRefusalReportFromJson(j);
  ASSERT_TRUE(kept) << kept.error().message;
  EXPECT_EQ(kept->refusals[0].user, "x\\x1b[31mEVIL\\u{202e}");
  for (const char* raw : {"ro\x1b[31mot\n\r", "rtl\u202e", "say \"hi\"", "\\q"}) {
    j["refusals"][0]["user"] = raw;
    auto refused = RelayRefusalReportFromJson(j);
    ASSERT_FALSE(refused) << core::BoundedPrintable(raw);
    EXPECT_EQ(refused.error().api_code, "invalid_field");
    EXPECT_EQ(refused.error().details["field"], "refusals[0].user");
  }
}

TEST(RelaySessionReportTest, RoundTripsOpenAndEnded) {
  const RelaySessionReport ended = SampleReport();
  EXPECT_EQ(RelaySessionReportFromJson(ToJson(ended)).value(), ended);
  RelaySessionReport open = ended;
  open.ended_at.reset();
  open.end_reason.clear();
  const json j = ToJson(open);
  EXPECT_TRUE(j["ended_at"].is_null());
  EXPECT_EQ(j["end_reason"], "");
  EXPECT_EQ(RelaySessionReportFromJson(j).value(), open);
}

TEST(RelaySessionReportTest, RefusesEveryMissingOrMistypedField) {
  ExpectStrict(ToJson(SampleReport()), RelaySessionReportFromJson,
               {"ended_at", "end_reason", "relay"});
}

TEST(RelaySessionReportTest, RefusesFieldsOutOfBounds) {
  for (auto [field, value] : {std::pair<std::string, json>{"relay", ""},
                              {"relay", std::string(129, 'r')},
                              {"person_id", ""},
                              {"instance_id", std::string(257, 'i')},
                              {"hostname", std::string(513, 'h')},
                              {"end_reason", std::string(1025, 'e')},
                              {"bytes_to_client", -1}}) {
    json j = ToJson(SampleReport());
    j[field] = value;
    auto r = RelaySessionReportFromJson(j);
    ASSERT_FALSE(r) << field;
    EXPECT_EQ(r.error().api_code, "invalid_field");
    EXPECT_EQ(r.error().details["field"], field);
  }
  json multibyte = ToJson(SampleReport());
  multibyte["relay"] = std::string(127, 'a') + "\u00e9";  // 128 characters, 129 bytes
  EXPECT_TRUE(RelaySessionReportFromJson(json::parse(multibyte.dump())));
}

TEST(RelayAuthorizeRequestTest, RefusesEmptyAndOverlongFields) {
  json j = ToJson(RelayAuthorizeRequest{.user = "u",
                                        .key_type = "k",
                                        .public_key = "p",
                                        .fingerprint = "f",
                                        .source_address = "192.0.2.1"});
  j["user"] = "";
  auto empty = RelayAuthorizeRequestFromJson(j);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message, "field 'user' must not be empty");
  j["user"] = std::string(16 * 1024 + 1, 'u');
  auto overlong = RelayAuthorizeRequestFromJson(j);
  ASSERT_FALSE(overlong);
  EXPECT_EQ(overlong.error().message, "field 'user' must be at most 16384 characters");
}

TEST(RelayRestartedTest, RoundTripsAndIsStrict) {
  const RelayRestarted r{.relay = "relay-1"};
  EXPECT_EQ(ToJson(r), json({{"relay", "relay-1"}}));
  EXPECT_EQ(RelayRestartedFromJson(ToJson(r)).value(), r);
  ExpectStrict(ToJson(r), RelayRestartedFromJson, {"relay"});
  // Without a name: the relay's credential names it (docs/ssh.md "The relay's API credential").
  EXPECT_EQ(ToJson(RelayRestarted{}), json::object());
  EXPECT_EQ(RelayRestartedFromJson(json::object()).value(), RelayRestarted{});
}

// What a relay sends the server refuses members the format does not define, naming them.
TEST(RelayRequestsTest, RefuseMembersTheyDoNotKnow) {
  json authorize = ToJson(RelayAuthorizeRequest{.user = "u",
                                                .key_type = "ssh-ed25519",
                                                .public_key = "AAAA",
                                                .fingerprint = "SHA256:x",
                                                .source_address = "192.0.2.1"});
  authorize["person_id"] = "per_other";
  json report = ToJson(SampleReport());
  report["bytes"] = 1;
  json restarted = ToJson(RelayRestarted{.relay = "relay-1"});
  restarted["closed"] = 3;
  const auto expect_refused = [](const auto& r, const std::string& field) {
    ASSERT_FALSE(r) << field;
    EXPECT_EQ(r.error().code, core::ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().api_code, "invalid_field");
    EXPECT_EQ(r.error().details.value("field", ""), field);
  };
  expect_refused(RelayAuthorizeRequestFromJson(authorize), "person_id");
  expect_refused(RelaySessionReportFromJson(report), "bytes");
  expect_refused(RelayRestartedFromJson(restarted), "closed");
}

// Issue 12 finding 6: the batched re-check and the watch stream's events.
TEST(RelayRecheckTest, RequestResultsAndAccessChangesRoundTrip) {
  const RelayRecheckRequest req{.relay_sessions = {{.id = "rls_1",
                                                    .instance_id = "ins_1",
                                                    .login = "root",
                                                    .request = {.user = "alpha-k3x7q",
                                                                .key_type = "ssh-ed25519",
                                                                .public_key = "AAAA",
                                                                .fingerprint = "SHA256:x",
                                                                .source_address = "192.0.2.1"}}}};
  const auto back = RelayRecheckRequestFromJson(ToJson(req));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->relay_sessions, req.relay_sessions);

  const std::vector<RelayRecheckResult> results = {{.id = "rls_1", .allowed = true},
                                                   {.id = "rls_2", .message = "gone"}};
  const json j = ToJson(results);
  EXPECT_FALSE(j["results"][0].contains("message"));
  EXPECT_EQ(RelayRecheckResultsFromJson(j).value(), results);

  const RelayAccessChange change{
      .instance_ids = {"ins_1"}, .key_fingerprints = {"SHA256:x"}, .reason = "instance deleted"};
  EXPECT_EQ(RelayAccessChangeFromJson(ToJson(change)).value(), change);
}

TEST(RelayRecheckTest, RefusesUnknownMembersAndOversizedBatches) {
  json item = {{"id", "rls_1"},
               {"instance_id", "ins_1"},
               {"login", "root"},
               {"request",
                {{"user", "u"},
                 {"key_type", "t"},
                 {"public_key", "k"},
                 {"fingerprint", "f"},
                 {"source_address", "192.0.2.1"}}}};
  json extra = item;
  extra["admin"] = true;
  EXPECT_EQ(RelayRecheckRequestFromJson({{"relay_sessions", {extra}}}).error().api_code,
            "invalid_field");
  json many = json::array();
  for (size_t i = 0; i <= kMaxRecheckBatch; ++i) many.push_back(item);
  const auto too_many = RelayRecheckRequestFromJson({{"relay_sessions", many}});
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().api_code, "invalid_field");
  EXPECT_EQ(RelayRecheckRequestFromJson({{"relay_sessions", json::array()}})
                .value()
                .relay_sessions.size(),
            0u);
}

}  // namespace
}  // namespace gpuwerk::protocol
