// What the agent writes into each container of a 2-host instance (R-8, docs/clusters.md): the
// files' text for each node, the checks on what the server sent, and the files on the host.
#include "agent/cluster_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace gpuwerk::agent {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrivate =
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQUJD\n"
    "-----END OPENSSH PRIVATE KEY-----\n";

protocol::ClusterSpec Node(int index) {
  protocol::ClusterSpec c{.node_index = index,
                          .rail_addresses = {"198.18.0.11", "198.18.0.12"},
                          .worker_public_key = "ssh-ed25519 AAAAworker gpuwerk-worker-ins_1",
                          .node1_host_public_key = "ssh-ed25519 AAAAhost gpuwerk-node1-ins_1"};
  if (index == 0) c.worker_private_key = kPrivate;
  if (index == 1) c.host_private_key = kPrivate;
  return c;
}

std::map<std::string, ClusterFile> ByTarget(const std::vector<ClusterFile>& files) {
  std::map<std::string, ClusterFile> out;
  for (const auto& f : files) out[f.target] = f;
  return out;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ClusterFilesTest, EachNodeKnowsItsOwnAddressBothNamesAndTheRendezvous) {
  for (int node : {0, 1}) {
    SCOPED_TRACE(node);
    ASSERT_TRUE(CheckClusterSpec(Node(node)));
    auto files = ByTarget(ClusterFiles(Node(node), RailOptions{}));
    const std::string own = node == 0 ? "198.18.0.11" : "198.18.0.12";
    const std::string& profile = files.at(std::string(kClusterProfileTarget)).content;
    EXPECT_TRUE(Has(profile, "export VLLM_HOST_IP=" + own + "\n"));
    EXPECT_TRUE(Has(profile, "export MASTER_ADDR=198.18.0.11\n"));
    EXPECT_TRUE(Has(profile, "export MASTER_PORT=29500\n"));
    EXPECT_TRUE(Has(profile, "export GPUWERK_NODE_INDEX=" + std::to_string(node) + "\n"));
    EXPECT_TRUE(Has(profile, "export OMPI_MCA_btl_tcp_if_include=eth1\n"));
    // Sessions that read no profile (ssh node1 cmd) get the same through sshd.
    const std::string& sshd = files.at(std::string(kClusterSshdDropInTarget)).content;
    EXPECT_TRUE(Has(sshd, "\nSetEnv "));
    EXPECT_TRUE(Has(sshd, " VLLM_HOST_IP=" + own));
    const std::string& nccl = files.at(std::string(kNcclConfTarget)).content;
    EXPECT_TRUE(Has(nccl, "NCCL_SOCKET_IFNAME=eth1\n"));
    EXPECT_TRUE(Has(nccl, "NCCL_IB_DISABLE=1\n"));
    EXPECT_TRUE(Has(nccl, "# TCP"));
    const std::string& mpi = files.at(std::string(kOpenMpiParamsTarget)).content;
    EXPECT_TRUE(Has(mpi, "btl_tcp_if_include = eth1\n"));
    EXPECT_TRUE(Has(mpi, "oob_tcp_if_include = eth1\n"));
    const std::string& md = files.at(std::string(kClusterDescriptionTarget)).content;
    for (int rank : {0, 1}) {
      EXPECT_TRUE(
          Has(md, "torchrun --nnodes=2 --nproc_per_node=1 --node_rank=" + std::to_string(rank) +
                      " --rdzv_backend=c10d --rdzv_endpoint=198.18.0.11:29400"));
    }
    EXPECT_TRUE(Has(md, "| node0 | 198.18.0.11 |"));
    EXPECT_TRUE(Has(md, "| node1 | 198.18.0.12 |"));
    EXPECT_TRUE(Has(md, "No shared filesystem"));
    EXPECT_TRUE(Has(md, "TCP sockets"));
    for (const auto& [target, f] : files) {
      EXPECT_FALSE(Has(f.content, "StrictHostKeyChecking no")) << target;
    }
  }
  EXPECT_EQ(ClusterExtraHosts(Node(1)),
            (std::vector<std::string>{"node0:198.18.0.11", "node1:198.18.0.12"}));
}

TEST(ClusterFilesTest, Node0LogsInToNode1WithTheWorkerKeyAndKnowsItsHostKey) {
  auto n0 = ByTarget(ClusterFiles(Node(0), RailOptions{}));
  const ClusterFile& key = n0.at(std::string(kWorkerKeyTarget));
  EXPECT_EQ(key.content, kPrivate);
  EXPECT_EQ(key.mode, 0600u);
  EXPECT_EQ(n0.at(std::string(kClusterKnownHostsTarget)).content,
            "node1,198.18.0.12 ssh-ed25519 AAAAhost\n");
  const std::string& ssh = n0.at(std::string(kClusterSshDropInTarget)).content;
  EXPECT_TRUE(Has(ssh, "Host node1 198.18.0.12\n"));
  EXPECT_TRUE(Has(ssh, "IdentityFile /etc/gpuwerk/ssh/id_ed25519\n"));
  EXPECT_TRUE(Has(ssh, "StrictHostKeyChecking yes\n"));
  EXPECT_FALSE(n0.contains(std::string(kHostKeyTarget)));  // node 0's sshd keeps its own keys

  auto n1 = ByTarget(ClusterFiles(Node(1), RailOptions{}));
  EXPECT_EQ(n1.at(std::string(kHostKeyTarget)).content, kPrivate);
  EXPECT_EQ(n1.at(std::string(kHostKeyTarget)).mode, 0600u);
  EXPECT_EQ(n1.at(std::string(kHostPublicKeyTarget)).content,
            "ssh-ed25519 AAAAhost gpuwerk-node1-ins_1\n");
  EXPECT_FALSE(n1.contains(std::string(kWorkerKeyTarget)));  // node 1 holds no worker key
  EXPECT_FALSE(n1.contains(std::string(kClusterSshDropInTarget)));
}

TEST(ClusterFilesTest, RdmaAndAnotherInterfaceAndIpv6) {
  protocol::ClusterSpec c = Node(1);
  c.rail_addresses = {"fd00::1", "fd00::2"};
  RailOptions rail{.network = "rail", .interface = "enp1s0f1", .rdma_devices = "mlx5_0"};
  ASSERT_TRUE(CheckRailOptions(rail));
  auto files = ByTarget(ClusterFiles(c, rail));
  const std::string& nccl = files.at(std::string(kNcclConfTarget)).content;
  EXPECT_TRUE(Has(nccl, "NCCL_SOCKET_IFNAME=enp1s0f1\n"));
  EXPECT_TRUE(Has(nccl, "NCCL_IB_DISABLE=0\nNCCL_IB_HCA=mlx5_0\n"));
  EXPECT_FALSE(Has(nccl, "TCP"));
  EXPECT_TRUE(Has(files.at(std::string(kClusterDescriptionTarget)).content,
                  "--rdzv_endpoint=[fd00::1]:29400"));
  EXPECT_FALSE(CheckRailOptions({.interface = "eth1; rm -rf /"}));
  EXPECT_FALSE(CheckRailOptions({.interface = ""}));
  EXPECT_FALSE(CheckRailOptions({.rdma_devices = "mlx5_0\nNCCL_DEBUG=INFO"}));
}

TEST(ClusterFilesTest, RefusesWhatCouldInjectIntoAFile) {
  auto refused = [](protocol::ClusterSpec c) {
    auto r = CheckClusterSpec(c);
    return !r && r.error().api_code == "invalid_cluster";
  };
  protocol::ClusterSpec c = Node(0);
  c.rail_addresses[1] = "198.18.0.12\nSetEnv X=1";
  EXPECT_TRUE(refused(c));
  c = Node(0);
  c.rail_addresses = {"198.18.0.11", "198.18.0.11"};
  EXPECT_TRUE(refused(c));
  c = Node(0);
  c.rail_addresses.pop_back();
  EXPECT_TRUE(refused(c));
  c = Node(0);
  c.worker_public_key = "ssh-ed25519 AAAA x\nssh-ed25519 BBBB y";
  EXPECT_TRUE(refused(c));
  c = Node(0);
  c.node1_host_public_key = "ssh-rsa AAAA";
  EXPECT_TRUE(refused(c));
  c = Node(0);
  c.worker_private_key = "";  // node 0 needs it
  EXPECT_TRUE(refused(c));
  c = Node(1);
  c.host_private_key = std::string(kPrivate) + "Match all\n";
  EXPECT_TRUE(refused(c));
  c = Node(0);
  c.rendezvous_port = 0;
  EXPECT_TRUE(refused(c));
}

TEST(ClusterFilesTest, WritesTheFilesWithTheirModesAndMountsThemReadOnly) {
  std::string tmpl = (fs::temp_directory_path() / "gpuwerk-cluster-XXXXXX").string();
  const fs::path root = ::mkdtemp(tmpl.data());
  const AgentKeysPaths keys{.dir = root / "containers" / "gpuwerk-ins_1-1",
                            .drop_in = root / "sshd-keys.conf"};
  const fs::path dir = ClusterFilesDir(keys);
  EXPECT_EQ(dir, root / "cluster" / "gpuwerk-ins_1-1");
  auto files = ClusterFiles(Node(1), RailOptions{});
  auto binds = WriteClusterFiles(dir, files);
  ASSERT_TRUE(binds) << binds.error().message;
  ASSERT_EQ(binds->size(), files.size());
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_TRUE((*binds)[i].read_only);
    EXPECT_EQ((*binds)[i].target, files[i].target);
    ASSERT_EQ(::stat((*binds)[i].source.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, files[i].mode) << files[i].name;
    std::ifstream in((*binds)[i].source);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), files[i].content);
  }
  // Written again (a container made again): the same files, replaced.
  EXPECT_TRUE(WriteClusterFiles(dir, files));
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpuwerk::agent
