#pragma once

#include <array>
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
/// (IPv4 and IPv6). Rebuilt whole at every agent start.
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

/// Installs the rules for both families and hooks the chains first into INPUT, FORWARD and
/// OUTPUT (once). Idempotent; safe to run from several agents on one host at once (each ruleset
/// is applied atomically; `-w` waits for the xtables lock). Errors: kUnavailable
/// "network_isolation_unavailable" with what failed (no iptables, no permission).
core::Result<void> InstallNetworkIsolation(const NetworkIsolationSettings& settings);

/// Sets a host up for `settings`: installs the rules when enabled. Returns what the host then
/// does not enforce, one sentence for the inventory's `limits.not_enforced` (isolation switched
/// off, or the rules could not be installed, with why), or "" when the instances are isolated.
std::string PrepareNetworkIsolation(const NetworkIsolationSettings& settings);

/// Unhooks and deletes the agent's chains for both families (tests, uninstall). Best effort.
void RemoveNetworkIsolation();

}  // namespace gpuwerk::agent
