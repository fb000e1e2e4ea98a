#pragma once

// What the agent puts into each container of a 2-host instance so that a distributed job starts
// with nothing to set up (R-8, docs/clusters.md): the node names, the rail addresses in every
// login shell, NCCL's and Open MPI's interface settings, a description with the filled-in
// torchrun lines, and node 0's passwordless SSH to node 1. All of it is files the agent writes on
// the host and the container mounts read-only (like its authorized_keys: nothing runs in the
// container and the tenant cannot change them), plus the engine's /etc/hosts entries.

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "agent/authorized_keys.h"
#include "agent/container_engine.h"
#include "core/error.h"
#include "protocol/agent_sync.h"

namespace gpuwerk::agent {

/// How the rail (the fabric between the two hosts of a pair) reaches a container on this host:
/// agent configuration (`gpuwerk agent --rail-network`, `--rail-interface`, `--rail-rdma-devices`;
/// docs/clusters.md "How the rail reaches the containers").
struct RailOptions {
  /// The engine network every node container of a 2-host instance joins as well, with its node's
  /// rail address as a fixed address (ContainerEngine::ConnectNetwork): a macvlan or ipvlan
  /// network on the host's fabric interface, or an SR-IOV network, made by the operator (a bridge
  /// in tests). "": none (the rail then does not reach the containers; the agent warns at start).
  std::string network;
  /// The rail's interface name inside the container (NCCL_SOCKET_IFNAME, Open MPI's
  /// btl/oob_tcp_if_include, GLOO_SOCKET_IFNAME): "eth1" for a second engine network. 1 to 15 of
  /// [A-Za-z0-9_.-].
  std::string interface = "eth1";
  /// The RDMA devices NCCL may use on the rail (NCCL_IB_HCA, e.g. "mlx5_0,mlx5_1"); "": no RDMA,
  /// NCCL runs over TCP sockets (NCCL_IB_DISABLE=1, said in the files).
  std::string rdma_devices;
};

/// Checks `options` (the interface name; RDMA devices of [A-Za-z0-9_.,:=^-]). Errors:
/// kInvalidArgument "invalid_option" naming the bad value.
core::Result<void> CheckRailOptions(const RailOptions& options);

/// One file of a node's cluster setup.
struct ClusterFile {
  std::string name;     ///< the file's name in the agent's directory, e.g. "nccl.conf"
  std::string target;   ///< where the container sees it, e.g. "/etc/nccl.conf"
  std::string content;  ///< its text
  mode_t mode = 0644;   ///< 0600 for private keys
};

/// Where each file goes in the container.
inline constexpr std::string_view kClusterDescriptionTarget = "/etc/gpuwerk/cluster.md";
inline constexpr std::string_view kNcclConfTarget = "/etc/nccl.conf";
inline constexpr std::string_view kClusterProfileTarget = "/etc/profile.d/gpuwerk-cluster.sh";
inline constexpr std::string_view kClusterSshdDropInTarget =
    "/etc/ssh/sshd_config.d/10-gpuwerk-cluster.conf";
inline constexpr std::string_view kClusterSshDropInTarget =
    "/etc/ssh/ssh_config.d/10-gpuwerk-cluster.conf";
inline constexpr std::string_view kOpenMpiParamsTarget = "/etc/openmpi/openmpi-mca-params.conf";
/// Node 0: the worker key and the known_hosts line naming node 1's host key.
inline constexpr std::string_view kWorkerKeyTarget = "/etc/gpuwerk/ssh/id_ed25519";
inline constexpr std::string_view kClusterKnownHostsTarget = "/etc/gpuwerk/ssh/known_hosts";
/// Node 1: its sshd's Ed25519 host key (sshd reads it at its default path).
inline constexpr std::string_view kHostKeyTarget = "/etc/ssh/ssh_host_ed25519_key";
inline constexpr std::string_view kHostPublicKeyTarget = "/etc/ssh/ssh_host_ed25519_key.pub";

/// Checks what the server sent before any of it goes into a file (R-22: the server's answer is
/// checked like any peer's): rail addresses are two different IPv4/IPv6 literals, public keys are
/// one "ssh-ed25519 BASE64[ COMMENT]" line of printable ASCII, private keys are one armoured
/// OpenSSH key of base64 lines, each present on the node that needs it (node 0: the worker key;
/// node 1: its host key). Errors: kInvalidArgument "invalid_cluster" saying which field.
core::Result<void> CheckClusterSpec(const protocol::ClusterSpec& cluster);

/// The files of one node (CheckClusterSpec first; `options` checked). Every node: cluster.md,
/// nccl.conf, the profile script and the sshd drop-in (SetEnv: the same variables for sessions
/// that read no profile, e.g. `ssh node1 cmd`), Open MPI's parameters. Node 0 also: the ssh
/// client drop-in, the worker key (0600) and known_hosts; node 1: its host key (0600) and its
/// public half. Pure.
std::vector<ClusterFile> ClusterFiles(const protocol::ClusterSpec& cluster,
                                      const RailOptions& options);

/// The engine's /etc/hosts entries: {"node0:<rail 0>", "node1:<rail 1>"}.
std::vector<std::string> ClusterExtraHosts(const protocol::ClusterSpec& cluster);

/// The host directory of one container's cluster files, beside its keys directory (`keys_dir/
/// cluster/<container name>`); removed with the container.
std::filesystem::path ClusterFilesDir(const AgentKeysPaths& keys);

/// Writes `files` into `dir` (created with mode 0700 when missing; each file replaced atomically
/// with its mode, owned by the agent's user: root, as sshd and ssh need for keys) and returns
/// their read-only bind mounts. Runs nothing anywhere. Errors: kUnavailable
/// "cluster_files_write_failed" naming the path and errno's text.
core::Result<std::vector<BindMount>> WriteClusterFiles(const std::filesystem::path& dir,
                                                       const std::vector<ClusterFile>& files);

}  // namespace gpuwerk::agent
