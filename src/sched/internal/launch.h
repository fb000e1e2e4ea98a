#pragma once

// The one way an instance comes to exist: shared by InstanceService::Create (a person asks) and
// QueueService::Drain (a queue entry's turn came). Not for use outside src/sched/.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "sched/sched_options.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// A GPU type's row.
struct TypeRow {
  int64_t hosts_per_instance = 1;
  int64_t price_minor_per_hour = 0;
  std::string currency;
};

/// The GPU type named `gpu_type`. Errors: kInvalidArgument unknown_gpu_type; the store's.
core::Result<TypeRow> LoadType(store::Transaction& tx, const std::string& gpu_type);

/// The SQL condition (over the hosts row aliased `alias`) that a host may take a new instance
/// now apart from being free: not drained, not degraded, engine fine, heard from recently. It
/// takes one parameter: the oldest `last_seen_at` (Unix seconds) that still counts as heard from.
std::string UsableHostSql(std::string_view alias);

/// A set of hosts that can take one instance now.
struct Slot {
  std::vector<std::string> host_ids;  ///< by node index
  std::string name;                   ///< node 0's host name; slots are ordered by it
};

/// Up to `limit` slots of `gpu_type` whose node-0 host name is ≥ `from_name`, by that name. A
/// slot of a 1-host type is one usable host holding no placement; a slot of a 2-host type
/// is one linked pair (host_pair_members) whose two hosts are both usable and free, node 0
/// first. Unpaired hosts of a 2-host type are never a slot. Usable: see UsableHostSql (heard
/// from within `unknown_after` seconds before `now`). Types of other sizes have no slots. Costs
/// one pass over the hosts from `from_name` on (there is no index on hosts by type).
core::Result<std::vector<Slot>> FreeSlots(store::Transaction& tx, const std::string& gpu_type,
                                          int64_t hosts_per_instance, int64_t limit, int64_t now,
                                          int64_t unknown_after, const std::string& from_name = "");

/// The slots of `gpu_type` that hold one of `host_ids` and can take an instance now (as
/// FreeSlots says), by node-0 host name, each once: for a 1-host type the hosts themselves, for
/// a 2-host type the pairs they belong to. Point lookups: O(log n) per host.
core::Result<std::vector<Slot>> SlotsOf(store::Transaction& tx, const std::string& gpu_type,
                                        int64_t hosts_per_instance,
                                        const std::vector<std::string>& host_ids, int64_t now,
                                        int64_t unknown_after);

/// A GPU type's capacity now (see FreeSlots for slots and usable hosts).
struct Capacity {
  int64_t free_slots = 0;  ///< instances that could be placed now, queue or not
  /// At least one instance's worth of usable hosts exists, free or busy: a usable host (1-host
  /// types) or a pair of two usable hosts (2-host types).
  bool online = false;
  int64_t heard_hosts = 0;  ///< hosts of the type heard from recently, drained or not
  int64_t hosts = 0;        ///< hosts of the type registered
  int64_t pairs = 0;        ///< linked pairs of hosts of the type
};

/// The capacity of `gpu_type` whose instances take `hosts_per_instance` hosts.
core::Result<Capacity> LoadCapacity(store::Transaction& tx, const std::string& gpu_type,
                                    int64_t hosts_per_instance, int64_t now, int64_t unknown_after);

/// fails kAlreadyExists name_taken when `person_id` has a live instance or an open queue
/// entry (other than `except_entry_id`) named `name`.
core::Result<void> CheckNameFree(store::Transaction& tx, const std::string& person_id,
                                 const std::string& name, const std::string& except_entry_id = "");

/// What to launch.
struct LaunchSpec {
  std::string person_id;
  std::string name;
  std::string ssh_key_id;
  std::string gpu_type;
  std::vector<std::string> host_ids;  ///< one per node, `TypeRow::hosts_per_instance` of them
  std::string actor_id;               ///< who is audited ("" for the system: a queue launch)
  std::string source_address;         ///< the caller's address, or "queue"
  nlohmann::json audit_detail = nlohmann::json::object();  ///< extra audit facts
};

/// Inserts the instance, its placements (UNIQUE(host_id): a host taken meanwhile fails with
/// constraint_violation), its billing session and the `instance.create` audit event, all
/// in `tx`. Returns the instance id ("ins_…"). Errors: not_found (no such key of this person);
/// unknown_gpu_type; the store's.
core::Result<std::string> InsertInstance(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                         const SchedOptions& options, const LaunchSpec& spec);

}  // namespace gpuwerk::sched::internal
