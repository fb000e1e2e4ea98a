// A 2-host instance end to end (R-8, docs/clusters.md): the real `gpuwerk server`, two `gpuwerk
// agent` processes (two hosts with their own identities on this one machine and one real podman
// API service), a real `gpuwerk relay`, the real instance image and the stock ssh client. The rail
// is stood in for by an internal bridge network the test makes on 198.18.0.0/15 (RFC 2544's
// benchmarking range), which both agents are told to use (`--rail-network`). A linked pair, a
// `spark-2x` launch through the API, then from node 0 through the relay: `ssh node1` without a
// prompt, each node's VLLM_HOST_IP, `getent hosts` on both, the torchrun lines, TCP from node 1 to
// node 0:29400; node 1's container killed shows in the status; a second launch answers no_capacity
// and can queue; delete removes both containers. Needs root (rootful podman).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/e2e_platform.h"
#include "tests/support/e2e_relay.h"
#include "tests/support/engine_probe.h"
#include "tests/support/eventually.h"
#include "tests/support/http_client.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/sign_up.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {
namespace {

const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-cluster-engine");

using nlohmann::json;
using std::chrono::seconds;

constexpr const char* kRail0 = "198.18.7.11";
constexpr const char* kRail1 = "198.18.7.12";

class ClusterE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << EngineEnvironment::setup_error();
    ASSERT_EQ(EngineEnvironment::setup_error(), "");
    engine_ = std::make_unique<EngineProbe>(EngineEnvironment::socket());
    ASSERT_TRUE(engine_->Up()) << "the suite's engine does not answer on "
                               << EngineEnvironment::socket();
    // The rail: an internal bridge (no gateway, no route off it), as docs/clusters.md asks of a
    // bridge rail. Its name is its bridge's, at most 15 characters.
    rail_ = "gwtrail" + std::to_string(::getpid() % 100000);
    engine_->Send("DELETE", "/v1.41/networks/" + rail_);
    auto made =
        engine_->Send("POST", "/v1.41/networks/create", 20,
                      json{{"Name", rail_},
                           {"Driver", "bridge"},
                           {"Internal", true},
                           {"IPAM", {{"Config", json::array({{{"Subnet", "198.18.7.0/24"}}})}}},
                           {"Options", {{"com.docker.network.bridge.name", rail_}}}}
                          .dump());
    ASSERT_TRUE(made.status == 201 || made.status == 200) << made.status << " " << made.body;
  }

  void TearDown() override {
    relay_.Stop(seconds(10));
    platform_.Stop();
    if (HasFailure()) {
      platform_.PrintLogs();
      std::cerr << "---- relay log\n" << Tail(dir_.path() / "relay.log") << "\n----\n";
    }
    if (engine_ && engine_->Up()) {
      platform_.RemoveContainers(*engine_);
      if (!rail_.empty()) engine_->Send("DELETE", "/v1.41/networks/" + rail_);
    }
  }

  /// The relay with a CA made here (its line goes to the agents), asking the server with a
  /// relay credential registered here.
  void StartRelay() {
    StartE2eRelay(*op_, "cluster-e2e", platform_.url(), dir_.path(), relay_, &relay_ca_,
                  &relay_port_);
  }

  /// `script` run by bash on node 0 through the relay (as the person: the key of the instance).
  CommandResult OnNode0(const std::string& script) {
    return RunCommand(dir_.path(),
                      "ssh -p " + std::to_string(relay_port_) + " -i " +
                          key_.private_path.string() +
                          " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                          " -o BatchMode=yes -o ConnectTimeout=10 -o LogLevel=ERROR " +
                          hostname_ + "@127.0.0.1 bash -s",
                      script);
  }

  /// What the engine says of the instance's containers, and whether their sshd answers, for a
  /// failure message.
  std::string Diagnose() {
    std::string out = "\n";
    for (const auto& ctr : engine_->ContainersWithLabel(kInstanceLabel, id_)) {
      const std::string cid = ctr["Id"].get<std::string>();
      json in = engine_->Inspect(cid);
      out +=
          "container " + ctr["Names"].dump() + " state " + in["State"].dump() + "\nports " +
          in["NetworkSettings"]["Ports"].dump() + "\nnetworks " +
          in["NetworkSettings"]["Networks"].dump() + "\nlogs:\n" +
          engine_->Send("GET", "/v1.41/containers/" + cid + "/logs?stdout=true&stderr=true").body +
          "\n";
      try {
        const std::string port = in["NetworkSettings"]["Ports"]["22/tcp"][0]["HostPort"];
        out += "banner: " +
               Script("timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + port +
                      " && head -c 40 <&3' 2>&1")
                   .out +
               "\n";
      } catch (const json::exception&) {
        out += "no port\n";
      }
    }
    return out;
  }

  /// The instance as the API shows it.
  json Instance() { return person_->Get("/api/v1/instances/" + id_).Json(); }

  TempDir dir_;
  E2ePlatform platform_{dir_.path()};
  std::unique_ptr<EngineProbe> engine_;
  std::unique_ptr<HttpClient> op_;
  std::unique_ptr<HttpClient> person_;
  ChildProcess relay_;
  std::string rail_;
  std::string relay_ca_;
  int relay_port_ = 0;
  GeneratedKey key_;
  std::string key_id_;
  std::string id_;
  std::string hostname_;
};

TEST_F(ClusterE2eTest, A2xInstanceIsAClusterReadyForADistributedJob) {
  platform_.StartServer();
  ASSERT_FALSE(HasFatalFailure());
  op_ = platform_.Operator();
  StartRelay();
  ASSERT_FALSE(HasFatalFailure());
  E2eHost& a = platform_.AddHost(*op_, "spark-rail-a", "spark-2x");
  E2eHost& b = platform_.AddHost(*op_, "spark-rail-b", "spark-2x");
  ASSERT_FALSE(a.token.empty() || b.token.empty());
  for (E2eHost* h : {&a, &b}) {
    platform_.StartAgent(*h, {"--relay-ca", relay_ca_, "--rail-network", rail_});
    ASSERT_FALSE(HasFatalFailure());
  }
  auto linked =
      op_->PostJson("/api/v1/admin/host-pairs",
                    {{"hosts", json::array({{{"name", a.name}, {"rail_address", kRail0}},
                                            {{"name", b.name}, {"rail_address", kRail1}}})}});
  ASSERT_EQ(linked.status, 201) << linked.body;

  person_ = platform_.SignUp("cluster@example.com");
  key_ = GenerateKey(dir_.path(), "person-key");
  auto k =
      person_->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key_.public_line}});
  ASSERT_EQ(k.status, 201) << k.body;
  key_id_ = k.Json()["id"];
  // The type comes online once both agents have synced (a create before would join the queue).
  ASSERT_TRUE(Eventually(
      [&] {
        for (const auto& t :
             person_->Get("/api/v1/gpu-types").Json().value("items", json::array())) {
          if (t.value("name", "") == "spark-2x") return t.value("online", false);
        }
        return false;
      },
      seconds(60)));
  auto r = person_->PostJson("/api/v1/instances",
                             {{"name", "pair"}, {"ssh_key_id", key_id_}, {"gpu_type", "spark-2x"}});
  ASSERT_EQ(r.status, 201) << r.body;
  id_ = r.Json()["id"];
  hostname_ = r.Json()["hostname"];
  json last;
  ASSERT_TRUE(Eventually(
      [&] {
        last = Instance();
        return last.value("status", "") == "running";
      },
      seconds(180)))
      << "never running; last: " << last.dump() << Diagnose();
  EXPECT_EQ(last["hosts"], json({a.name, b.name}));
  EXPECT_EQ(last["nodes"], json::parse(R"([{"index":0,"host":")" + a.name +
                                       R"(","status":"running"},{"index":1,"host":")" + b.name +
                                       R"(","status":"running"}])"))
      << last.dump();

  // From node 0 through the relay: ssh node1 with no prompt (BatchMode fails where a prompt
  // would be), each node's own rail address, the names on both, the torchrun lines.
  CommandResult c = OnNode0(
      "set -e\n"
      "echo \"node1=$(ssh -n -o BatchMode=yes -o ConnectTimeout=10 node1 hostname)\"\n"
      "echo \"vllm0=$VLLM_HOST_IP\"\n"
      "echo \"login0=$(bash -lc 'echo $VLLM_HOST_IP')\"\n"
      "echo \"vllm1=$(ssh -n -o BatchMode=yes node1 'echo $VLLM_HOST_IP')\"\n"
      "echo \"login1=$(ssh -n -o BatchMode=yes node1 \"bash -lc 'echo \\$VLLM_HOST_IP'\")\"\n"
      "echo \"hosts0=$(getent hosts node0 node1 | tr -s ' \\n' ' ')\"\n"
      "echo \"hosts1=$(ssh -n -o BatchMode=yes node1 'getent hosts node0 node1' | tr -s ' \\n' ' "
      "')\"\n"
      "grep -o -- '--node_rank=[01] --rdzv_backend=c10d --rdzv_endpoint=[^ ]*' "
      "/etc/gpuwerk/cluster.md\n"
      "grep -c 'No shared filesystem' /etc/gpuwerk/cluster.md\n"
      "grep NCCL_IB_DISABLE=1 /etc/nccl.conf\n");
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  const std::string n0(kRail0), n1(kRail1);
  EXPECT_NE(c.out.find("node1=" + hostname_ + "-n1\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("vllm0=" + n0 + "\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("login0=" + n0 + "\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("vllm1=" + n1 + "\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("login1=" + n1 + "\n"), std::string::npos) << c.out;
  const std::string hosts = n0 + " node0 " + n1 + " node1 ";
  EXPECT_NE(c.out.find("hosts0=" + hosts + "\n"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("hosts1=" + hosts + "\n"), std::string::npos) << c.out;
  for (const char* rank : {"0", "1"}) {
    EXPECT_NE(c.out.find(std::string("--node_rank=") + rank +
                         " --rdzv_backend=c10d --rdzv_endpoint=" + n0 + ":29400\n"),
              std::string::npos)
        << c.out;
  }
  EXPECT_NE(c.out.find("\n1\nNCCL_IB_DISABLE=1\n"), std::string::npos) << c.out;

  // TCP from node 1 to node 0's rail address on the rendezvous port, while node 0 listens there.
  c = OnNode0(
      "setsid perl -MIO::Socket::INET -e '$s=IO::Socket::INET->new(LocalAddr=>\"" + n0 +
      "\",LocalPort=>29400,Listen=>5,ReuseAddr=>1) or die; $c=$s->accept; print $c \"RDZV\\n\"; "
      "close $c' </dev/null >/dev/null 2>&1 &\n"
      "sleep 0.5\n"
      "ssh -n -o BatchMode=yes node1 'for i in $(seq 20); do timeout 2 bash -c \"exec "
      "3<>/dev/tcp/node0/29400 && cat <&3\" 2>/dev/null && exit 0; sleep 0.2; done; exit 1'\n");
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_EQ(c.out, "RDZV\n") << c.err;

  // Node 1's container killed: the instance's status says so and names node 1.
  json node1 = json::array();
  for (const auto& ctr : engine_->ContainersWithLabel(kInstanceLabel, id_)) {
    if (ctr["Labels"].value("gpuwerk.node", "") == "1") node1.push_back(ctr);
  }
  ASSERT_EQ(node1.size(), 1u) << node1.dump();
  // The engine answers a KILL only once the container has exited (Docker's API contract, kept by
  // podman's compatibility handler): with the anonymous /var/lib/docker volume and the networks to
  // clean up that took over the probe's default 20 s on a loaded CI machine, while the agent had
  // already reported the kill. So the kill gets the time a loaded machine needs.
  auto killed = engine_->Send(
      "POST", "/v1.41/containers/" + node1[0]["Id"].get<std::string>() + "/kill?signal=KILL", 120);
  ASSERT_TRUE(killed.status == 204 || killed.status == 200)
      << killed.status << " " << killed.error << " " << killed.body;
  ASSERT_TRUE(Eventually(
      [&] {
        last = Instance();
        return last.value("status_reason", "").find("node 1") != std::string::npos;
      },
      seconds(15)))
      << "the status never named node 1; last: " << last.dump();

  // One pair only: a second 2x launch has no capacity and offers the queue, which takes it.
  auto second = person_->PostJson(
      "/api/v1/instances", {{"name", "pair2"}, {"ssh_key_id", key_id_}, {"gpu_type", "spark-2x"}});
  EXPECT_EQ(second.status, 409) << second.body;
  EXPECT_EQ(second.Json().value("code", ""), "no_capacity") << second.body;
  auto queued =
      person_->PostJson("/api/v1/queue-entries",
                        {{"name", "pair2"}, {"ssh_key_id", key_id_}, {"gpu_type", "spark-2x"}});
  EXPECT_EQ(queued.status, 201) << queued.body;
  EXPECT_EQ(person_->Delete("/api/v1/queue-entries/" + queued.Json().value("id", "")).status / 100,
            2);

  // Delete removes both containers.
  auto gone = person_->Delete("/api/v1/instances/" + id_);
  EXPECT_EQ(gone.status / 100, 2) << gone.body;
  EXPECT_TRUE(Eventually(
      [&] {
        json list = engine_->ContainersWithLabel(kInstanceLabel, id_);
        return list.is_array() && list.empty();
      },
      seconds(60)));
}

}  // namespace
}  // namespace gpuwerk::testing
