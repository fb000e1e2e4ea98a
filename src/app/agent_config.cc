#include "app/agent_config.h"

#include "app/common_options.h"

namespace gpuwerk::app {

const std::vector<Option<AgentConfig>>& AgentOptions() {
  using C = AgentConfig;
  static const std::vector<Option<C>> kOptions = {
      ServerUrlOption<C>(),
      {.key = "host_token",
       .field = &C::host_token,
       .help = "this host's token (gwh_…, from `gpuwerk admin hosts add`)",
       .flag = "--token-file",
       .required = true,
       .secret = true},
      {.key = "engine",
       .field = &C::engine,
       .help = "the container engine, a Docker Engine API socket unix:///PATH",
       .required = true},
      {.key = "ssh_bind",
       .field = &C::ssh_bind,
       .help = "the host's internal address the instances' sshd ports are published on; never a "
               "wildcard"},
      {.key = "state_dir", .field = &C::state_dir, .help = "where the agent keeps its state"},
      {.key = "sync_interval_seconds",
       .field = &C::sync_interval_seconds,
       .help = "seconds between rounds until the server says otherwise"},
      LogLevelOption<C>(),
      {.key = "relay_cas",
       .field = &C::relay_cas,
       .help = "an SSH relay CA's public line (\"ssh-ed25519 AAAA… gpuwerk-relay-ca\", printed by "
               "`gpuwerk relay` at start): each instance's authorized_keys trusts it for that "
               "instance's certificates alone; repeat the flag for relays with their own CAs",
       .flag = "--relay-ca",
       .details = "In the environment one line per CA; in the file a string or an array of "
                  "strings (docs/ssh.md \"Upstream: the relay credential\")."},
      {.key = "relay_ca_probe",
       .field = &C::relay_ca_probe,
       .help = "the probe certificate `gpuwerk relay` prints beside its CA "
               "(\"ssh-ed25519-cert-v01@openssh.com AAAA…\"): the agent offers it to check that "
               "each instance's sshd still takes the relay's certificates; it cannot log in",
       .details = "Without it the agent checks its own copy of the file only."},
      {.key = "relay_keys",
       .field = &C::relay_keys,
       .help = "a plain SSH relay key line, for relays older than the relay CA only: it opens "
               "every instance that holds it (docs/ssh.md); repeat the flag for several",
       .flag = "--relay-key",
       .details = "In the environment one line per key; in the file a string or an array of "
                  "strings."},
      {.key = "relay_from",
       .field = &C::relay_from,
       .help = "restrict every relay CA and relay key line to these source addresses: sshd from= "
               "patterns, comma-separated (e.g. 10.0.0.2,10.0.1.0/24), no quotes or blanks",
       .details = "Set it to the relays' addresses as the instances' sshd sees them "
                  "(docs/agent-protocol.md)."},
      {.key = "instance_memory_bytes",
       .field = &C::instance_memory_bytes,
       .help = "each instance container's memory limit in bytes (no swap beyond it); 0: the "
               "host's memory less instance_memory_reserve_bytes",
       .shown_default = "0 (automatic)",
       .details = "The server's instance_memory_bytes applies instead when it is lower "
                  "(docs/isolation.md)."},
      {.key = "instance_memory_reserve_bytes",
       .field = &C::instance_memory_reserve_bytes,
       .help = "memory an automatic limit leaves to the host (agent, engine, sshd, OS; under "
               "`gpuwerk up` also the server and relay), bytes; the limit is at least half the "
               "host's memory"},
      {.key = "instance_cpus",
       .field = &C::instance_cpus,
       .help = "each instance container's CPU limit, a decimal number of CPUs (e.g. 7.5); empty: "
               "the host's CPUs less instance_cpus_reserved",
       .shown_default = "(automatic)"},
      {.key = "instance_cpus_reserved",
       .field = &C::instance_cpus_reserved,
       .help = "CPUs an automatic CPU limit leaves to the host, a decimal number; the limit is at "
               "least half the host's CPUs"},
      {.key = "instance_pids_limit",
       .field = &C::instance_pids_limit,
       .help = "the most processes and threads an instance container may have at once"},
      {.key = "instance_add_capabilities",
       .field = &C::instance_add_capabilities,
       .help = "a Linux capability added to the instances' minimal set (e.g. NET_RAW for ping); "
               "repeat the flag for several",
       .flag = "--instance-add-capability",
       .details = "Containers keep only the capabilities a root login through sshd needs "
                  "(docs/isolation.md lists them and why); NET_RAW lets a tenant forge packets "
                  "on the instance's network."},
      {.key = "instance_network_isolation",
       .field = &C::instance_network_isolation,
       .help = "on: each instance gets a network of its own, filtered so that it reaches the "
               "internet and its own ports only (needs iptables); off: the engine's default "
               "bridge, unfiltered",
       .details = "The rules and what they do not cover are in docs/isolation.md. When the rules "
                  "cannot be installed the host's inventory says so."},
      {.key = "instance_network_deny",
       .field = &C::instance_network_deny,
       .help = "a destination range (CIDR) instances may not reach, besides other instances and "
               "this host; repeat the flag for several",
       .flag = "--instance-network-deny",
       .shown_default = "private, shared, link-local ranges",
       .details = "The default: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, "
                  "169.254.0.0/16 (cloud metadata), fc00::/7, fe80::/10. Setting the option "
                  "replaces the whole list."},
      {.key = "instance_network_allow",
       .field = &C::instance_network_allow,
       .help = "a destination (CIDR) instances may reach although the deny list or the host rule "
               "refuses it, e.g. the site's DNS resolver or a package mirror; repeat the flag for "
               "several",
       .flag = "--instance-network-allow",
       .details = "Never opens another instance's network."},
      {.key = "rail_network",
       .field = &C::rail_network,
       .help = "the container engine network on this host's fabric (rail) interface that each "
               "node of a 2-host instance joins with its rail address: a macvlan, ipvlan or "
               "SR-IOV network the operator made; empty: the rail does not reach the containers",
       .details = "How to make it, and what reaches it: docs/clusters.md."},
      {.key = "rail_interface",
       .field = &C::rail_interface,
       .help = "the rail's interface name inside a 2-host instance's containers (eth1 for a "
               "second engine network), written into NCCL's, Gloo's and Open MPI's settings"},
      {.key = "rail_rdma_devices",
       .field = &C::rail_rdma_devices,
       .help = "the RDMA devices NCCL may use on the rail (NCCL_IB_HCA, e.g. mlx5_0,mlx5_1); "
               "empty: NCCL runs over TCP sockets (NCCL_IB_DISABLE=1, said in the instance)"},
      DockerInsideOption<C>(),
      InstanceShmOption<C>(),
  };
  return kOptions;
}

}  // namespace gpuwerk::app
