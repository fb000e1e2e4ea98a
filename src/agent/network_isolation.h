#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace gpuwerk::agent {

/// Every instance network's name starts with this; it is also the prefix of its bridge interface
/// on the host, which the filter rules match (`gwi+`).
inline constexpr std::string_view kInstanceNetworkPrefix = "gwi";

/// The label an instance network carries: the instance id it belongs to. The agent removes a
/// labelled network whose instance has no container left (on its host).
inline constexpr std::string_view kNetworkInstanceLabel = "gpuwerk.network.instance";

/// The chains the agent owns, hooked first from INPUT, FORWARD and OUTPUT of the filter table
/// (IPv4 and IPv6). Rebuilt whole at every agent start; the agent keeps each jump the first rule
/// of its hook while it runs (KeepNetworkIsolation).
inline constexpr std::string_view kInputChain = "GPUWERK-ISOLATION-INPUT";
inline constexpr std::string_view kForwardChain = "GPUWERK-ISOLATION-FORWARD";
inline constexpr std::string_view kOutputChain = "GPUWERK-ISOLATION-OUTPUT";

/// The default deny list: private (RFC 1918, unique local fc00::/7), shared address space
/// (100.64.0.0/10, carrier-grade NAT) and link-local (169.254.0.0/16 with the cloud metadata
/// address 169.254.169.254; fe80::/10) ranges.
inline constexpr std::array<std::string_view, 7> kDefaultInstanceNetworkDeny = {
    "10.0.0.0/8",     "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
    "169.254.0.0/16", "fc00::/7",      "fe80::/10"};

/// The network of one instance's container on its host: "gwi" and 12 hex digits of a hash of the
/// instance id (15 characters, the longest name a Linux interface may have).
std::string InstanceNetworkName(std::string_view instance_id);

/// The host configuration of instance network filtering (`gpuwerk agent` options
/// `instance_network_*`, docs/isolation.md).
struct NetworkIsolationSettings {
  /// Whether instances get networks of their own and the filter rules; false: the engine's
  /// default bridge, no rules (the host is then not isolated; the inventory says so).
  bool enabled = true;
  /// Destinations an instance may not reach (CIDR, IPv4 or IPv6), besides other instances and
  /// the host itself, which are always refused.
  std::vector<std::string> deny{kDefaultInstanceNetworkDeny.begin(),
                                kDefaultInstanceNetworkDeny.end()};
  /// Destinations an instance may reach although the deny list or the host rule would refuse
  /// them (e.g. a package mirror on the LAN, the site's DNS resolver). Never another instance.
  std::vector<std::string> allow;
};

/// A CIDR (`address/len`, or a bare address meaning /32 or /128) in canonical form, or
/// kInvalidArgument "invalid_cidr". `ipv6` is set to the family.
core::Result<std::string> CanonicalCidr(std::string_view text, bool* ipv6);

/// Checks and canonicalises the settings: "on"/"off" for `enabled_text`, CIDRs in the lists.
/// Errors: kInvalidArgument "invalid_option" naming the bad entry.
core::Result<NetworkIsolationSettings> ParseNetworkIsolation(std::string_view enabled_text,
                                                             const std::vector<std::string>& deny,
                                                             const std::vector<std::string>& allow);

/// The `iptables-restore --noflush` (or `ip6tables-restore`) input that (re)defines the agent's
/// chains for one family: declaring a chain flushes it, so applying it twice leaves one copy.
/// The rules, in order (docs/isolation.md):
///   INPUT   from an instance: replies pass; allowed destinations pass; the rest is refused.
///   FORWARD from an instance: replies pass; to another instance network refused; allowed
///           destinations pass; denied destinations refused; the rest (the internet) passes.
///           To an instance: replies and published ports (conntrack DNAT) pass; the rest refused.
///   OUTPUT  to an instance: replies and published ports pass; the rest (the host's own
///           processes, e.g. a relay forwarding a tunnel) refused.
std::string IsolationRuleset(const NetworkIsolationSettings& settings, bool ipv6);

/// What one run of a firewall tool gave.
struct FirewallCommandResult {
  int status = -1;  ///< its exit status; -1: it could not be run
  std::string out;  ///< its stdout (the first 16 MiB)
  std::string err;  ///< its stderr (the first 2000 bytes), trailing blanks cut
};

/// Runs one firewall tool (`iptables-save`, `ip6tables-restore`, …): `argv`, `input` on its
/// stdin. The seam tests replace; RunFirewallTool is the host's.
using FirewallRunner = std::function<FirewallCommandResult(const std::vector<std::string>& argv,
                                                           std::string_view input)>;

/// The host's FirewallRunner: a child process (found on PATH, /usr/sbin or /sbin), waited for.
FirewallCommandResult RunFirewallTool(const std::vector<std::string>& argv, std::string_view input);

/// Where the jump to one of the agent's chains stands in the built-in chain that hooks it.
struct HookPlacement {
  std::string hook;   ///< INPUT, FORWARD or OUTPUT
  std::string chain;  ///< the agent's chain that `-A HOOK -j CHAIN` jumps to
  int position = 0;   ///< the rule number (1-based) of the first such jump; 0: none
  int jumps = 0;      ///< how many such jumps the hook holds
  /// When the jump is not the hook's first rule: that first rule, as iptables-save lists it.
  std::string above;
  /// Whether the jump is the hook's first rule, and its only jump to `chain`.
  bool First() const { return position == 1 && jumps == 1; }
};

/// What a family's filter table says of the agent's chains.
struct FilterState {
  std::vector<HookPlacement> hooks;  ///< INPUT, FORWARD and OUTPUT, in that order
  std::vector<std::string> missing;  ///< the agent's chains that are not there or hold no rule
};

/// Reads `iptables-save -t filter` (or `ip6tables-save`; legacy or nf_tables backed, which list
/// alike) text.
FilterState ReadFilterState(std::string_view save_output);

/// The `iptables-restore --noflush` input that makes each jump of `hooks` that is not First() the
/// hook's first rule and only jump: every jump there is deleted and one inserted as rule 1, in one
/// transaction (never a moment without it; a rule deleted meanwhile by another program makes the
/// transaction fail rather than delete another rule). "" when every jump is first.
std::string HookRepairRuleset(const std::vector<HookPlacement>& hooks);

/// One thing KeepNetworkIsolation set right, for the caller's log.
struct IsolationRepair {
  enum class Kind {
    kChainsRestored,  ///< the agent's chains were gone or empty (a flush, a firewall reload)
    kJumpInserted,    ///< a hook had no jump to the agent's chain
    kJumpMoved,       ///< the jump was not the hook's first rule (or not its only one)
  };
  Kind kind = Kind::kJumpMoved;
  bool ipv6 = false;
  /// One sentence; the text listed by the firewall (another program's rule) in it is escaped and
  /// bounded.
  std::string what;
};

/// Checks, in both families, that the agent's chains hold their rules and that each is jumped to
/// by the first rule of its hook (INPUT, FORWARD, OUTPUT), and sets right what is not: chains gone
/// or empty get IsolationRuleset again; a jump that is missing, below another rule (podman's CNI
/// plugins insert their jumps at the top of FORWARD when a container joins a network; Docker
/// its DOCKER-USER) or doubled is made the first rule (HookRepairRuleset). Reads each family with
/// one `iptables-save -t filter`; writes only when something is wrong. A file lock keeps several
/// agents of one host from repairing at once; a transaction that fails because the table changed
/// meanwhile is tried again (3 times). Returns what it set right (empty: all was in place).
/// Errors: kUnavailable "network_isolation_unavailable" with what failed.
core::Result<std::vector<IsolationRepair>> KeepNetworkIsolation(
    const NetworkIsolationSettings& settings, const FirewallRunner& run = RunFirewallTool);

/// Installs the rules for both families (IsolationRuleset through `iptables-restore --noflush`,
/// `ip6tables-restore`), then KeepNetworkIsolation: each chain hooked as the first rule of
/// INPUT, FORWARD and OUTPUT. Idempotent; safe to run from several agents on one host at once.
/// Returns KeepNetworkIsolation's repairs (a first install inserts the jumps). Errors: kUnavailable
/// "network_isolation_unavailable" with what failed (no iptables, no permission).
core::Result<std::vector<IsolationRepair>> InstallNetworkIsolation(
    const NetworkIsolationSettings& settings, const FirewallRunner& run = RunFirewallTool);

/// Sets a host up for `settings`: installs the rules when enabled. Returns what the host then
/// does not enforce, one sentence for the inventory's `limits.not_enforced` (isolation switched
/// off, or the rules could not be installed, with why), or "" when the instances are isolated.
/// `repairs`, when given, gets InstallNetworkIsolation's (for the caller's log).
std::string PrepareNetworkIsolation(const NetworkIsolationSettings& settings,
                                    std::vector<IsolationRepair>* repairs = nullptr);

/// Unhooks and deletes the agent's chains for both families (tests, uninstall). Best effort.
void RemoveNetworkIsolation();

}  // namespace gpuwerk::agent
