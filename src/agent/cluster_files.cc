#include "agent/cluster_files.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>

namespace gpuwerk::agent {
namespace {

core::Error Invalid(std::string_view what) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_cluster",
                     fmt::format("the server's cluster description is not usable: {}", what));
}

bool IsIpLiteral(const std::string& text) {
  in_addr v4{};
  in6_addr v6{};
  return ::inet_pton(AF_INET, text.c_str(), &v4) == 1 ||
         ::inet_pton(AF_INET6, text.c_str(), &v6) == 1;
}

bool IsBase64(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=';
  });
}

/// "ssh-ed25519 BASE64[ COMMENT]", the comment printable ASCII without spaces.
bool IsEd25519Line(std::string_view line) {
  constexpr std::string_view kType = "ssh-ed25519 ";
  if (!line.starts_with(kType) || line.size() > 1024) return false;
  line.remove_prefix(kType.size());
  const size_t space = line.find(' ');
  const std::string_view b64 = line.substr(0, space);
  const std::string_view comment = space == std::string_view::npos ? "" : line.substr(space + 1);
  return IsBase64(b64) &&
         std::all_of(comment.begin(), comment.end(), [](char c) { return c > ' ' && c <= '~'; });
}

/// One armoured OpenSSH private key: the BEGIN line, base64 lines, the END line, a newline.
bool IsOpenSshPrivateKey(std::string_view key) {
  constexpr std::string_view kBegin = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
  constexpr std::string_view kEnd = "-----END OPENSSH PRIVATE KEY-----\n";
  if (!key.starts_with(kBegin) || !key.ends_with(kEnd) || key.size() > 8192) return false;
  std::string_view body = key.substr(kBegin.size(), key.size() - kBegin.size() - kEnd.size());
  if (body.empty()) return false;
  while (!body.empty()) {
    const size_t nl = body.find('\n');
    if (nl == std::string_view::npos || !IsBase64(body.substr(0, nl))) return false;
    body.remove_prefix(nl + 1);
  }
  return true;
}

bool IsInterfaceName(std::string_view s) {
  return !s.empty() && s.size() <= 15 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

/// The two fields sshd and ssh compare: "ssh-ed25519 BASE64", the comment dropped.
std::string KeyWithoutComment(const std::string& line) {
  const size_t second = line.find(' ', line.find(' ') + 1);
  return line.substr(0, second);
}

/// host:port as torchrun's --rdzv_endpoint takes it ([v6]:port).
std::string Endpoint(const std::string& address, int port) {
  const bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

}  // namespace

core::Result<void> CheckRailOptions(const RailOptions& options) {
  if (!IsInterfaceName(options.interface)) {
    return core::InvalidArgument(
        "invalid_option",
        fmt::format("rail_interface must be an interface name (1 to 15 of A-Z a-z 0-9 _ . -), "
                    "not \"{}\"",
                    options.interface.substr(0, 32)));
  }
  const bool devices_ok =
      std::all_of(options.rdma_devices.begin(), options.rdma_devices.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) ||
               std::string_view("_.,:=^-").find(c) != std::string_view::npos;
      });
  if (!devices_ok || options.rdma_devices.size() > 256) {
    return core::InvalidArgument(
        "invalid_option",
        "rail_rdma_devices must be an NCCL_IB_HCA list such as mlx5_0,mlx5_1 (letters, digits and "
        "_ . , : = ^ -)");
  }
  return {};
}

core::Result<void> CheckClusterSpec(const protocol::ClusterSpec& c) {
  if (c.node_index != 0 && c.node_index != 1)
    return core::Fail(Invalid("node_index is not 0 or 1"));
  if (c.rail_addresses.size() != 2 || !IsIpLiteral(c.rail_addresses[0]) ||
      !IsIpLiteral(c.rail_addresses[1]) || c.rail_addresses[0] == c.rail_addresses[1]) {
    return core::Fail(Invalid("rail_addresses are not two different IP addresses"));
  }
  if (c.master_port < 1 || c.master_port > 65535 || c.rendezvous_port < 1 ||
      c.rendezvous_port > 65535) {
    return core::Fail(Invalid("a port is not 1 to 65535"));
  }
  if (!IsEd25519Line(c.worker_public_key)) {
    return core::Fail(Invalid("worker_public_key is not an ssh-ed25519 line"));
  }
  if (!IsEd25519Line(c.node1_host_public_key)) {
    return core::Fail(Invalid("node1_host_public_key is not an ssh-ed25519 line"));
  }
  if (c.node_index == 0 && !IsOpenSshPrivateKey(c.worker_private_key)) {
    return core::Fail(Invalid("node 0 needs worker_private_key, an OpenSSH private key"));
  }
  if (c.node_index == 1 && !IsOpenSshPrivateKey(c.host_private_key)) {
    return core::Fail(Invalid("node 1 needs host_private_key, an OpenSSH private key"));
  }
  return {};
}

std::vector<std::string> ClusterExtraHosts(const protocol::ClusterSpec& c) {
  return {"node0:" + c.rail_addresses.at(0), "node1:" + c.rail_addresses.at(1)};
}

std::vector<ClusterFile> ClusterFiles(const protocol::ClusterSpec& c, const RailOptions& options) {
  const std::string& node0 = c.rail_addresses.at(0);
  const std::string& node1 = c.rail_addresses.at(1);
  const std::string& own = c.rail_addresses.at(static_cast<size_t>(c.node_index));
  const std::string& ifname = options.interface;
  const bool rdma = !options.rdma_devices.empty();
  const std::string rdzv = Endpoint(node0, c.rendezvous_port);

  // The variables every shell and every ssh session on this node gets (values checked above:
  // addresses, numbers and an interface name, nothing that needs quoting).
  const std::vector<std::pair<std::string, std::string>> vars = {
      {"GPUWERK_NODE_INDEX", std::to_string(c.node_index)},
      {"GPUWERK_NODE_COUNT", "2"},
      {"GPUWERK_NODE0_ADDR", node0},
      {"GPUWERK_NODE1_ADDR", node1},
      {"VLLM_HOST_IP", own},
      {"MASTER_ADDR", node0},
      {"MASTER_PORT", std::to_string(c.master_port)},
      {"GLOO_SOCKET_IFNAME", ifname},
      {"OMPI_MCA_btl_tcp_if_include", ifname},
      {"OMPI_MCA_oob_tcp_if_include", ifname},
      // Everyone is root in an instance; Open MPI refuses root without these.
      {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
      {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
  };
  std::string profile =
      "# gpuwerk: this node of a 2-host instance (see /etc/gpuwerk/cluster.md). Read-only.\n";
  std::string set_env;
  for (const auto& [name, value] : vars) {
    profile += "export " + name + "=" + value + "\n";
    set_env += " " + name + "=" + value;
  }
  const std::string sshd =
      "# gpuwerk: the cluster's variables for every ssh session, login shell or not\n"
      "# (see /etc/gpuwerk/cluster.md). Read-only.\nSetEnv" +
      set_env + "\n";

  std::string nccl = fmt::format(
      "# gpuwerk: NCCL on the rail of this 2-host instance (see /etc/gpuwerk/cluster.md).\n"
      "# Read-only; a variable set in the environment overrides a line here.\n"
      "NCCL_SOCKET_IFNAME={}\n",
      ifname);
  if (rdma) {
    nccl += fmt::format("NCCL_IB_DISABLE=0\nNCCL_IB_HCA={}\n", options.rdma_devices);
  } else {
    nccl +=
        "# TCP: this host gives instances no RDMA device, so NCCL talks over TCP sockets on the\n"
        "# rail (slower than RoCE).\n"
        "NCCL_IB_DISABLE=1\n";
  }

  const std::string mpi = fmt::format(
      "# gpuwerk: Open MPI on the rail of this 2-host instance (see /etc/gpuwerk/cluster.md).\n"
      "btl_tcp_if_include = {0}\n"
      "oob_tcp_if_include = {0}\n",
      ifname);

  std::string md = fmt::format(
      "# This instance's cluster: 2 nodes on the rail\n\n"
      "You are on node{0}. The nodes reach each other over the rail (interface `{1}` here) and\n"
      "nothing else reaches them there.\n\n"
      "| node | rail address | this node |\n"
      "| --- | --- | --- |\n"
      "| node0 | {2} | {3} |\n"
      "| node1 | {4} | {5} |\n\n"
      "`node0` and `node1` resolve to these addresses on both nodes (/etc/hosts). Every login\n"
      "shell and ssh session has `VLLM_HOST_IP={6}` (this node's rail address),\n"
      "`MASTER_ADDR={2}`, `MASTER_PORT={7}`, `GPUWERK_NODE_INDEX={0}`.\n\n"
      "Transport: {8}\n\n"
      "## Start a job\n\n"
      "torchrun, on node0:\n\n"
      "    torchrun --nnodes=2 --nproc_per_node=1 --node_rank=0 --rdzv_backend=c10d "
      "--rdzv_endpoint={9} train.py\n\n"
      "and on node1:\n\n"
      "    torchrun --nnodes=2 --nproc_per_node=1 --node_rank=1 --rdzv_backend=c10d "
      "--rdzv_endpoint={9} train.py\n\n"
      "(set `--nproc_per_node` to the GPUs per node). From node0, `ssh node1 <command>` logs in\n"
      "to node1 without a password (this instance's own worker key; node1's host key is known),\n"
      "so `mpirun -np 2 --host node0,node1 hostname` works too; Open MPI is set to the rail\n"
      "(/etc/openmpi/openmpi-mca-params.conf), NCCL too (/etc/nccl.conf).\n\n"
      "## No shared filesystem\n\n"
      "Each node has its own disk: nothing written on one node appears on the other. Copy code\n"
      "and data to both before a job, e.g. from node0: `rsync -a ./ node1:$PWD/`.\n",
      c.node_index, ifname, node0, c.node_index == 0 ? "yes" : "", node1,
      c.node_index == 1 ? "yes" : "", own, c.master_port,
      rdma ? "RDMA (NCCL_IB_HCA=" + options.rdma_devices + ")."
           : "TCP sockets: this host gives instances no RDMA device (NCCL_IB_DISABLE=1).",
      rdzv);

  std::vector<ClusterFile> files = {
      {.name = "cluster.md", .target = std::string(kClusterDescriptionTarget), .content = md},
      {.name = "nccl.conf", .target = std::string(kNcclConfTarget), .content = nccl},
      {.name = "profile.sh", .target = std::string(kClusterProfileTarget), .content = profile},
      {.name = "sshd.conf", .target = std::string(kClusterSshdDropInTarget), .content = sshd},
      {.name = "openmpi-mca-params.conf",
       .target = std::string(kOpenMpiParamsTarget),
       .content = mpi},
  };
  if (c.node_index == 0) {
    files.push_back(
        {.name = "ssh.conf",
         .target = std::string(kClusterSshDropInTarget),
         .content = fmt::format(
             "# gpuwerk: node0 logs in to node1 over the rail with this instance's worker key\n"
             "# (see /etc/gpuwerk/cluster.md). Read-only.\n"
             "Host node1 {0}\n"
             "    User root\n"
             "    IdentityFile {1}\n"
             "    GlobalKnownHostsFile /etc/ssh/ssh_known_hosts {2}\n"
             "    StrictHostKeyChecking yes\n",
             node1, kWorkerKeyTarget, kClusterKnownHostsTarget)});
    files.push_back({.name = "id_ed25519",
                     .target = std::string(kWorkerKeyTarget),
                     .content = c.worker_private_key,
                     .mode = 0600});
    files.push_back(
        {.name = "known_hosts",
         .target = std::string(kClusterKnownHostsTarget),
         .content = "node1," + node1 + " " + KeyWithoutComment(c.node1_host_public_key) + "\n"});
  } else {
    files.push_back({.name = "ssh_host_ed25519_key",
                     .target = std::string(kHostKeyTarget),
                     .content = c.host_private_key,
                     .mode = 0600});
    files.push_back({.name = "ssh_host_ed25519_key.pub",
                     .target = std::string(kHostPublicKeyTarget),
                     .content = c.node1_host_public_key + "\n"});
  }
  return files;
}

std::filesystem::path ClusterFilesDir(const AgentKeysPaths& keys) {
  return keys.dir.parent_path().parent_path() / "cluster" / keys.dir.filename();
}

core::Result<std::vector<BindMount>> WriteClusterFiles(const std::filesystem::path& dir,
                                                       const std::vector<ClusterFile>& files) {
  const auto rename_code = [](core::Error e) {
    e.api_code = "cluster_files_write_failed";
    return core::Fail(std::move(e));
  };
  if (auto made = EnsurePrivateHostDir(dir); !made) return rename_code(made.error());
  std::vector<BindMount> binds;
  for (const ClusterFile& f : files) {
    if (auto written = ReplaceHostFile(dir / f.name, f.content, f.mode); !written) {
      return rename_code(written.error());
    }
    binds.push_back({.source = (dir / f.name).string(), .target = f.target, .read_only = true});
  }
  return binds;
}

}  // namespace gpuwerk::agent
