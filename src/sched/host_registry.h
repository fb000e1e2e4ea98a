#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "sched/page.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// One GPU host as registered by the operator and last reported by its agent.
struct Host {
  std::string id;  ///< "hst_…"
  std::string name;
  std::string gpu_type;
  bool gpu_required = true;  ///< false: the operator registered it as a host without a GPU
  bool drained = false;      ///< a drained host gets no new instances
  int64_t created_at = 0;    ///< Unix seconds
  std::optional<int64_t> last_seen_at;  ///< Unix seconds of the last agent sync; none yet
  nlohmann::json inventory = nlohmann::json::object();  ///< as the agent last reported it
  std::string engine_error;  ///< the agent's last container-engine error; "" when fine
  /// Why the host gets no new instances although it is heard from (case C13): its GPU is not
  /// visible, or the engine's NVIDIA runtime failed a create. "" when healthy. A runtime failure
  /// stays until the operator undrains the host (SetDrained false) after fixing it.
  std::string degraded_reason;
  /// Where the relay connects for this host's instances (issue 12 finding 1), as the operator
  /// registered it, never as the agent reports it: the address its sshd ports are published on
  /// (an IP literal or DNS name, core::IsHostAddress); "" while none is registered, and the relay
  /// then refuses this host's instances.
  std::string ssh_address;
  /// The range of TCP ports (inclusive, 1..65535) its published sshd ports may use; a container
  /// reported on another port is not reachable through the relay. 0 and 0 while none is
  /// registered.
  int64_t ssh_port_low = 0;
  int64_t ssh_port_high = 0;
  std::string instance_id;    ///< the instance placed here, "" when free (List and Get only)
  std::string instance_name;  ///< that instance's name, "" when free (List and Get only)
  /// The linked pair this host belongs to; "" when unpaired (List and Get only).
  std::string pair_id;
  int64_t node_index = 0;    ///< its node in the pair: 0 or 1 (List and Get only)
  std::string rail_address;  ///< its rail (fabric) IP address in the pair (List and Get only)
  std::string partner;       ///< the other host of the pair, by name (List and Get only)
};

/// One host of a linked pair.
struct HostPairMember {
  std::string host_id;
  std::string host_name;
  int64_t node_index = 0;    ///< 0 or 1; node 0 is the one a 2x instance's user lands on
  std::string rail_address;  ///< IPv4 or IPv6 literal, normalised (inet_ntop)
};

/// Two hosts of a 2-host GPU type linked by a rail (fabric): together one slot for one
/// instance of that type (R-7, R-8, migration 5).
struct HostPair {
  std::string id;  ///< "hpr_…"
  std::string gpu_type;
  int64_t created_at = 0;               ///< Unix seconds
  std::vector<HostPairMember> members;  ///< node 0, then node 1
  std::string instance_id;              ///< the instance placed on it, "" when free
};

/// One page of pairs, oldest first.
using HostPairPage = Page<HostPair>;
/// One page of hosts, by name.
using HostPage = Page<Host>;

/// What the operator asks of one node of a pair to link.
struct PairNode {
  std::string host_name;
  std::string rail_address;  ///< an IPv4 or IPv6 literal
};

/// A GPU type's configuration as the operator sets it: each field set is changed, each
/// unset one kept (or, when the type is created, its default: description "", currency "usd";
/// hosts_per_instance and price_minor_per_hour are required then).
struct GpuTypeChange {
  std::optional<std::string> description;       ///< at most 200 characters, no control characters
  std::optional<int64_t> hosts_per_instance;    ///< 1 or 2
  std::optional<int64_t> price_minor_per_hour;  ///< ≥ 0, minor units per hour
  std::optional<std::string> currency;          ///< 3 lowercase letters (ISO 4217), e.g. "usd"
};

/// A GPU type's configuration as stored.
struct GpuTypeConfig {
  std::string name;
  std::string description;
  int64_t hosts_per_instance = 1;
  int64_t price_minor_per_hour = 0;
  std::string currency;
};

/// The port range a registration gets when none is given: every unprivileged port, which holds
/// the ports Docker and podman choose when they publish a container's port (the kernel's
/// ephemeral range, 32768–60999 by default).
inline constexpr int64_t kDefaultSshPortLow = 1024;
inline constexpr int64_t kDefaultSshPortHigh = 65535;

/// Where the relay reaches a host's instances, as the operator registers it (`gpuwerk admin hosts
/// add --ssh-address ADDR --ssh-ports LOW-HIGH`, `set-ssh`; docs/ssh.md "Upstream address").
struct SshRegistration {
  std::string address;                    ///< an IP literal (IPv6 without brackets) or DNS name
  int64_t port_low = kDefaultSshPortLow;  ///< the range of its published sshd ports, inclusive
  int64_t port_high = kDefaultSshPortHigh;
};

/// Checks a registration: `address` must be an IP literal or DNS name (core::IsHostAddress:
/// nothing that starts with '-', no blank, '@' or '/'); the range must be
/// 1 ≤ port_low ≤ port_high ≤ 65535. Errors: kInvalidArgument invalid_ssh_address,
/// invalid_ssh_ports. Pure.
core::Result<void> CheckSshRegistration(const SshRegistration& ssh);

/// A host just registered, with its agent token. The token is shown once and stored hashed.
struct NewHost {
  Host host;
  std::string token;  ///< "gwh_…" (256-bit)
};

/// The operator's capacity: hosts (register, list, drain, remove; agents authenticate by host
/// token), linked host pairs and GPU types. Every change is audited.
/// Thread-safe (state lives in the store). Changes that may free capacity (a host added or
/// undrained, a pair linked) do not drain the queue themselves: the caller calls
/// QueueService::Drain for the type.
class HostRegistry {
 public:
  HostRegistry(store::Database& db, core::Clock& clock, core::Rng& rng)
      : db_(db), clock_(clock), rng_(rng) {}

  /// Registers a host. `name` is a DNS label (1–63 of [a-z0-9-], not starting or ending in '-').
  /// `ssh` (CheckSshRegistration), when given, is where the relay reaches its instances; without
  /// it the relay refuses them until SetSsh. Audited `host.add`. Errors: invalid_name;
  /// kInvalidArgument unknown_gpu_type, invalid_ssh_address, invalid_ssh_ports; kAlreadyExists
  /// name_taken. Nothing is stored on an error.
  core::Result<NewHost> Add(const std::string& actor_id, std::string_view name,
                            std::string_view gpu_type, bool gpu_required,
                            const std::string& source_address,
                            const std::optional<SshRegistration>& ssh = std::nullopt);
  /// Registers host `name` (gpu_type, gpu_required, ssh) if absent, or gives the registered one a
  /// new agent token (the old one stops working at once), the given `gpu_required` and `ssh`;
  /// returns the host and its new token. Used by `gpuwerk up` for the machine's own agent, which
  /// gets a fresh token on every start so that no token is kept on disk. Audited as `host.add` or
  /// `host.token_rotated`. Errors: as Add (a registered host of another GPU type:
  /// kFailedPrecondition "gpu_type_mismatch").
  core::Result<NewHost> AddOrRotateToken(const std::string& actor_id, std::string_view name,
                                         std::string_view gpu_type, bool gpu_required,
                                         const std::string& source_address,
                                         const std::optional<SshRegistration>& ssh = std::nullopt);
  /// Registers (or changes) where the relay reaches host `name`'s instances (CheckSshRegistration).
  /// An open relay session whose instance's port falls outside the new range ends at its next
  /// re-authorization; others keep their connection. Audited `host.set_ssh` with the values before
  /// and after. Returns the host as Get shows it. Errors: invalid_ssh_address, invalid_ssh_ports;
  /// not_found. Nothing is changed on an error.
  core::Result<Host> SetSsh(const std::string& actor_id, std::string_view name,
                            const SshRegistration& ssh, const std::string& source_address);
  /// The hosts by name, 15 a page (1-based), each with its instance and pair fields.
  /// Errors: invalid_page.
  core::Result<HostPage> List(int page);
  /// Host `name` with its instance and pair fields. Errors: not_found.
  core::Result<Host> Get(std::string_view name);
  /// The host whose agent token is `token`. Errors: kUnauthenticated "unauthenticated".
  core::Result<Host> AuthenticateAgent(std::string_view token);
  /// Drains (`drained` true) or undrains a host by name; undraining also clears
  /// `degraded_reason` (the operator says the host is fixed). Errors: not_found.
  core::Result<void> SetDrained(const std::string& actor_id, std::string_view name, bool drained,
                                const std::string& source_address);
  /// Removes host `name`: its agent token stops working at once, its observations go, and the
  /// pair it belonged to is unlinked (the partner stays registered, unpaired). Returns the host
  /// as it was. Audited `host.remove`. Errors: not_found; kFailedPrecondition host_in_use
  /// (details: instance_id) while an instance is placed on it or on its partner.
  core::Result<Host> Remove(const std::string& actor_id, std::string_view name,
                            const std::string& source_address);

  /// Links two registered hosts of one 2-host GPU type into a pair; `node0` becomes node 0.
  /// Audited `host_pair.link`. Errors: kInvalidArgument invalid_pair (the same host twice, or
  /// the same rail address twice), invalid_rail_address (not an IPv4/IPv6 literal; details:
  /// host); not_found (no such host; details: host); kFailedPrecondition gpu_type_mismatch (the
  /// hosts serve different types), not_a_pair_type (their type takes 1 host per instance);
  /// kAlreadyExists already_paired (details: host, pair_id).
  core::Result<HostPair> LinkPair(const std::string& actor_id, const PairNode& node0,
                                  const PairNode& node1, const std::string& source_address);
  /// The pairs, oldest first, 15 a page (1-based). Errors: invalid_page.
  core::Result<HostPairPage> ListPairs(int page);
  /// Unlinks pair `id` (both hosts stay registered, unpaired). Audited `host_pair.unlink`.
  /// Errors: not_found; kFailedPrecondition host_in_use (details: instance_id) while an
  /// instance is placed on either host.
  core::Result<HostPair> UnlinkPair(const std::string& actor_id, std::string_view id,
                                    const std::string& source_address);

  /// Creates GPU type `name` or changes it. Price and currency changes apply to billing
  /// sessions opened afterwards (each session copies the price at launch). Returns the stored
  /// type and whether it was created. Audited `gpu_type.create` / `gpu_type.update` with the
  /// values before and after. Errors: invalid_name (not a DNS label); kInvalidArgument
  /// invalid_field (details: field; a required field missing on create),
  /// invalid_hosts_per_instance (not 1 or 2), invalid_price (negative or over 10^9),
  /// invalid_currency (not 3 lowercase letters), invalid_description (over 200 characters or
  /// control characters); kFailedPrecondition gpu_type_in_use (details: instances,
  /// queue_entries, hosts) when hosts_per_instance would change while the type has live
  /// instances, open queue entries or hosts.
  core::Result<std::pair<GpuTypeConfig, bool>> SetGpuType(const std::string& actor_id,
                                                          std::string_view name,
                                                          const GpuTypeChange& change,
                                                          const std::string& source_address);

 private:
  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
};

/// The SHA-256 hex digest under which a host token is stored.
std::string HostTokenHash(std::string_view token);

/// Checks a DNS label (RFC 1123: 1–63 of [a-z0-9-], no leading or trailing '-').
/// Errors: kInvalidArgument "invalid_name" with a message naming `what`.
core::Result<void> ValidateDnsLabel(std::string_view name, std::string_view what);

}  // namespace gpuwerk::sched
