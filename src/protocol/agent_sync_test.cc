#include "protocol/agent_sync.h"

#include <gtest/gtest.h>

#include "protocol/testing/strict_fields.h"

namespace gpuwerk::protocol {
namespace {

using nlohmann::json;
using testing::ExpectStrict;

AgentSyncRequest SampleRequest() {
  AgentSyncRequest r;
  r.agent_version = "0.1.0";
  r.inventory = {.gpus = {{.name = "NVIDIA GB10", .uuid = "GPU-1", .memory_bytes = 137438953472}},
                 .memory_bytes = 137438953472,
                 .cpus = 20,
                 .addresses = {"10.0.0.5"},
                 .rail_addresses = {"192.168.100.1"},
                 .ssh_address = "10.0.0.5",
                 .nvml = "ok"};
  r.engine = {.ok = true, .error = ""};
  r.containers = {{.instance_id = "ins_a",
                   .node_index = 1,
                   .container_id = "c0ffee",
                   .state = "running",
                   .exit_code = 0,
                   .started_at = "2026-11-30T04:10:03Z",
                   .ssh_port = 40123,
                   .ssh_ready = true,
                   .restart_generation = 2,
                   .error = ""}};
  r.failures = {{.instance_id = "ins_b",
                 .node_index = 0,
                 .code = "image_not_found",
                 .message = "no such image"}};
  return r;
}

AgentSyncAnswer SampleAnswer() {
  AgentSyncAnswer a;
  a.host_id = "hst_1";
  a.sync_interval_seconds = 2;
  a.desired = {{.instance_id = "ins_a",
                .node_index = 0,
                .container_name = "gpuwerk-ins_a-0",
                .hostname = "alpha-7f3k",
                .image = "localhost/gpuwerk-instance:bookworm",
                .memory_bytes = 1024,
                .gpu = true,
                .authorized_keys = {"ssh-ed25519 AAAA a\n"},
                .restart_generation = 1,
                .env = {"GPUWERK_INSTANCE=alpha"}}};
  a.desired_version = "42";
  return a;
}

TEST(AgentSyncRequestTest, RoundTripsWithTheDocumentedFieldNames) {
  const AgentSyncRequest r = SampleRequest();
  const json j = ToJson(r);
  EXPECT_EQ(j["inventory"]["gpus"][0]["memory_bytes"], 137438953472);
  EXPECT_EQ(j["inventory"]["ssh_address"], "10.0.0.5");
  EXPECT_EQ(j["containers"][0]["ssh_port"], 40123);
  EXPECT_EQ(j["failures"][0]["code"], "image_not_found");
  EXPECT_FALSE(j.contains("observed"));
  auto back = AgentSyncRequestFromJson(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, r);

  AgentSyncRequest first = r;
  first.observed = false;
  EXPECT_EQ(ToJson(first)["observed"], false);
  EXPECT_EQ(AgentSyncRequestFromJson(ToJson(first)).value(), first);
}

TEST(AgentSyncRequestTest, RefusesEveryMissingOrMistypedField) {
  json j = ToJson(SampleRequest());
  j["observed"] = false;
  ExpectStrict(j, AgentSyncRequestFromJson, {"observed", "inventory.limits"});
}

// Host key (docs/agent-protocol.md "Host key"): written only when known (an older server refuses
// members it does not know), read back, a string of at most 512 characters.
TEST(AgentSyncRequestTest, SshHostKeyIsOptionalAndBounded) {
  EXPECT_FALSE(ToJson(SampleRequest())["containers"][0].contains("ssh_host_key"));
  AgentSyncRequest r = SampleRequest();
  r.containers[0].ssh_host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMq";
  json j = ToJson(r);
  EXPECT_EQ(j["containers"][0]["ssh_host_key"], "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMq");
  EXPECT_EQ(AgentSyncRequestFromJson(j).value(), r);
  j["containers"][0]["ssh_host_key"] = 5;
  EXPECT_EQ(AgentSyncRequestFromJson(j).error().api_code, "invalid_field");
  j["containers"][0]["ssh_host_key"] = std::string(513, 'A');
  auto long_key = AgentSyncRequestFromJson(j);
  ASSERT_FALSE(long_key);
  EXPECT_EQ(long_key.error().details.value("field", ""), "containers[0].ssh_host_key");
}

// Finish time (docs/billing.md "Evidence"): sent only when the engine gave one, read back, a string
// of at most 64 characters.
TEST(AgentSyncRequestTest, FinishedAtIsOptionalAndBounded) {
  EXPECT_FALSE(ToJson(SampleRequest())["containers"][0].contains("finished_at"));
  AgentSyncRequest r = SampleRequest();
  r.containers[0].finished_at = "2026-11-30T05:00:00.123456789Z";
  json j = ToJson(r);
  EXPECT_EQ(j["containers"][0]["finished_at"], "2026-11-30T05:00:00.123456789Z");
  EXPECT_EQ(AgentSyncRequestFromJson(j).value(), r);
  j["containers"][0]["finished_at"] = std::string(65, '1');
  auto long_time = AgentSyncRequestFromJson(j);
  ASSERT_FALSE(long_time);
  EXPECT_EQ(long_time.error().details.value("field", ""), "containers[0].finished_at");
}

DriftReport SampleDrift() {
  return {.instance_id = "ins_a",
          .node_index = 0,
          .kind = "changed",
          .container_id = "c0ffee",
          .exit_code = 0,
          .oom_killed = false,
          .at = "",
          .recreated = false,
          .new_container_id = "",
          .changes = {"memory", "name"}};
}

// Drift (docs/agent-protocol.md "Drift"): optional, written only when there is some (an older
// server refuses members it does not know), and as strict as the rest when present.
TEST(AgentSyncRequestTest, DriftIsOptionalAndStrict) {
  EXPECT_FALSE(ToJson(SampleRequest()).contains("drift"));
  AgentSyncRequest r = SampleRequest();
  r.drift = {SampleDrift(),
             {.instance_id = "ins_a",
              .node_index = 1,
              .kind = "removed",
              .container_id = "old",
              .recreated = true,
              .new_container_id = "new"},
             {.instance_id = "ins_a",
              .node_index = 0,
              .kind = "stopped",
              .container_id = "c0ffee",
              .exit_code = 137,
              .oom_killed = true,
              .at = "2026-12-02T01:00:00Z"}};
  const json j = ToJson(r);
  ASSERT_EQ(j["drift"].size(), 3u);
  EXPECT_EQ(j["drift"][1]["kind"], "removed");
  EXPECT_EQ(j["drift"][1]["new_container_id"], "new");
  EXPECT_EQ(j["drift"][2]["exit_code"], 137);
  EXPECT_EQ(AgentSyncRequestFromJson(j).value(), r);
  ExpectStrict(j, AgentSyncRequestFromJson, {"drift", "inventory.limits"});

  json kind = j;
  kind["drift"][0]["kind"] = "deleted";
  auto k = AgentSyncRequestFromJson(kind);
  ASSERT_FALSE(k);
  EXPECT_EQ(k.error().api_code, "invalid_field");
  EXPECT_EQ(k.error().details["field"], "drift[0].kind");
  json change = j;
  change["drift"][0]["changes"][1] = "labels";
  auto c = AgentSyncRequestFromJson(change);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().details["field"], "drift[0].changes[1]");
  json unknown = j;
  unknown["drift"][2]["signal"] = "SIGTERM";
  auto u = AgentSyncRequestFromJson(unknown);
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().details["field"], "drift[2].signal");
  json empty_id = j;
  empty_id["drift"][0]["instance_id"] = "";
  EXPECT_FALSE(AgentSyncRequestFromJson(empty_id));
}

TEST(AgentSyncRequestTest, RefusesWhatIsNotAnObjectAndPortsOutOfRange) {
  auto r = AgentSyncRequestFromJson(json::array());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().details["field"], "body");
  json j = ToJson(SampleRequest());
  j["containers"][0]["ssh_port"] = 70000;
  auto port = AgentSyncRequestFromJson(j);
  ASSERT_FALSE(port);
  EXPECT_EQ(port.error().details["field"], "containers[0].ssh_port");
}

// What an agent sends the server is strict both ways (R-19): a member the format does not define
// is refused, naming it. (Answers the agent reads still tolerate new members:
// DesiredContainerTest.)
TEST(AgentSyncRequestTest, RefusesMembersItDoesNotKnow) {
  json top = ToJson(SampleRequest());
  top["future"] = 1;
  auto r = AgentSyncRequestFromJson(top);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().api_code, "invalid_field");
  EXPECT_EQ(r.error().details["field"], "future");
  json nested = ToJson(SampleRequest());
  nested["containers"][0]["future"] = true;
  auto c = AgentSyncRequestFromJson(nested);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().details["field"], "containers[0].future");
  json limits = ToJson(SampleRequest());
  limits["inventory"]["limits"]["swap"] = 0;
  auto l = AgentSyncRequestFromJson(limits);
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().details["field"], "inventory.limits.swap");
}

// docs/docker-inside.md: the host says its Docker inside mode and /dev/shm size (optional
// members of `limits`); anything but the three modes is refused.
TEST(AgentSyncRequestTest, LimitsCarryDockerInsideAndShm) {
  AgentSyncRequest r = SampleRequest();
  r.inventory.limits.docker_inside = "privileged";
  r.inventory.limits.shm_bytes = int64_t{16} << 30;
  const json j = ToJson(r);
  EXPECT_EQ(j["inventory"]["limits"]["docker_inside"], "privileged");
  EXPECT_EQ(j["inventory"]["limits"]["shm_bytes"], int64_t{16} << 30);
  auto back = AgentSyncRequestFromJson(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->inventory.limits, r.inventory.limits);
  // An agent that does not say: neither member is sent, and both read back as unset.
  const json older = ToJson(SampleRequest());
  EXPECT_FALSE(older["inventory"]["limits"].contains("docker_inside"));
  EXPECT_FALSE(older["inventory"]["limits"].contains("shm_bytes"));
  json bad = j;
  bad["inventory"]["limits"]["docker_inside"] = "yes";
  auto refused = AgentSyncRequestFromJson(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().details["field"], "inventory.limits.docker_inside");
  bad = j;
  bad["inventory"]["limits"]["shm_bytes"] = -1;
  EXPECT_FALSE(AgentSyncRequestFromJson(bad));
}

TEST(AgentSyncAnswerTest, RoundTrips) {
  const AgentSyncAnswer a = SampleAnswer();
  const json j = ToJson(a);
  EXPECT_EQ(j["desired"][0]["container_name"], "gpuwerk-ins_a-0");
  EXPECT_EQ(j["desired_version"], "42");
  auto back = AgentSyncAnswerFromJson(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, a);

  AgentSyncAnswer no_version = a;
  no_version.desired_version.reset();
  EXPECT_FALSE(ToJson(no_version).contains("desired_version"));
  EXPECT_EQ(AgentSyncAnswerFromJson(ToJson(no_version)).value(), no_version);
}

TEST(AgentSyncAnswerTest, RefusesEveryMissingOrMistypedField) {
  ExpectStrict(ToJson(SampleAnswer()), AgentSyncAnswerFromJson, {"desired_version"});
}

TEST(AgentSyncAnswerTest, RefusesEmptyNamesAndANullList) {
  for (const char* field : {"instance_id", "container_name", "image"}) {
    json j = ToJson(SampleAnswer());
    j["desired"][0][field] = "";
    auto r = AgentSyncAnswerFromJson(j);
    ASSERT_FALSE(r) << field;
    EXPECT_EQ(r.error().details["field"], std::string("desired[0].") + field);
  }
  json empty_host = ToJson(SampleAnswer());
  empty_host["host_id"] = "";
  EXPECT_FALSE(AgentSyncAnswerFromJson(empty_host));
  json null_list = ToJson(SampleAnswer());
  null_list["desired"] = nullptr;
  auto r = AgentSyncAnswerFromJson(null_list);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().details["field"], "desired");
}

TEST(DesiredContainerTest, ReadsEveryFieldAndIgnoresUnknownOnes) {
  const json j = json::parse(R"({
    "instance_id": "ins_1", "node_index": 1, "container_name": "gpuwerk-ins_1-1",
    "hostname": "alpha-7f3k", "image": "img:1", "memory_bytes": 1024, "gpu": true,
    "authorized_keys": ["ssh-ed25519 AAAA a\n"], "restart_generation": 4,
    "env": ["GPUWERK_INSTANCE=alpha"], "future_field": 1})");
  auto d = DesiredContainerFromJson(j, "desired[0]");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->instance_id, "ins_1");
  EXPECT_EQ(d->node_index, 1);
  EXPECT_EQ(d->container_name, "gpuwerk-ins_1-1");
  EXPECT_EQ(d->hostname, "alpha-7f3k");
  EXPECT_EQ(d->image, "img:1");
  EXPECT_EQ(d->memory_bytes, 1024);
  EXPECT_TRUE(d->gpu);
  EXPECT_EQ(d->authorized_keys, std::vector<std::string>{"ssh-ed25519 AAAA a\n"});
  EXPECT_EQ(d->restart_generation, 4);
  EXPECT_EQ(d->env, std::vector<std::string>{"GPUWERK_INSTANCE=alpha"});
}

TEST(DesiredContainerTest, CarriesTheClusterOfA2HostInstanceAndNoneFor1Host) {
  DesiredContainer d{.instance_id = "ins_1",
                     .node_index = 1,
                     .container_name = "gpuwerk-ins_1-1",
                     .image = "img:1"};
  EXPECT_FALSE(ToJson(d).contains("cluster"));  // an older agent reads a 1-host answer as before
  EXPECT_FALSE(DesiredContainerFromJson(ToJson(d)).value().cluster);
  d.cluster = ClusterSpec{.node_index = 1,
                          .rail_addresses = {"198.18.0.11", "198.18.0.12"},
                          .worker_public_key = "ssh-ed25519 AAAA w",
                          .node1_host_public_key = "ssh-ed25519 BBBB h",
                          .host_private_key = "-----BEGIN OPENSSH PRIVATE KEY-----\n"};
  auto back = DesiredContainerFromJson(ToJson(d), "desired[0]");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, d);
  ExpectStrict(ToJson(*d.cluster), [](const json& j) { return ClusterSpecFromJson(j); });

  json bad = ToJson(d);
  bad["cluster"]["node_index"] = 2;
  auto r = DesiredContainerFromJson(bad, "desired[0]");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().details["field"], "desired[0].cluster.node_index");
  bad = ToJson(d);
  bad["cluster"]["rail_addresses"] = json::array({"198.18.0.11"});
  r = DesiredContainerFromJson(bad, "desired[0]");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().details["field"], "desired[0].cluster.rail_addresses");
}

TEST(AgentWatchAnswerTest, RoundTripsAndRefusesMissingOrMistypedFields) {
  const AgentWatchAnswer a{.version = "7"};
  EXPECT_EQ(ToJson(a), json({{"version", "7"}}));
  EXPECT_EQ(AgentWatchAnswerFromJson(ToJson(a)).value(), a);
  ExpectStrict(ToJson(a), AgentWatchAnswerFromJson);
}

}  // namespace
}  // namespace gpuwerk::protocol
