#pragma once

// The `hosts` table (migrations 2, 3, 12): registered GPU hosts, and the capacity questions asked
// of them (free slots, online). Not for use outside src/sched/.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "sched/host_registry.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// A set of hosts that can take one instance now.
struct Slot {
  std::vector<std::string> host_ids;  ///< by node index
  std::string name;                   ///< node 0's host name; slots are ordered by it
};

/// A GPU type's capacity now (see HostTable::FreeSlots for slots and usable hosts).
struct Capacity {
  int64_t free_slots = 0;  ///< instances that could be placed now, queue or not
  /// At least one instance's worth of usable hosts exists, free or busy: a usable host (1-host
  /// types) or a pair of two usable hosts (2-host types).
  bool online = false;
  int64_t heard_hosts = 0;  ///< hosts of the type heard from recently, drained or not
  int64_t hosts = 0;        ///< hosts of the type registered
  int64_t pairs = 0;        ///< linked pairs of hosts of the type
};

/// What one agent sync stores about its host.
struct HostSyncRecord {
  int64_t last_seen_at = 0;  ///< Unix seconds
  std::string inventory;     ///< JSON text, bounded
  std::string engine_error;  ///< "" when the engine is fine
  std::string degraded_reason;
};

/// The `hosts` table's SQL, inside the caller's transaction; errors are the store's. Stateless.
class HostTable {
 public:
  HostTable() = delete;

  static core::Result<std::optional<Host>> FindByName(store::Transaction& tx,
                                                      const std::string& name);
  /// The host whose agent token hashes to `token_hash` (HostTokenHash).
  static core::Result<std::optional<Host>> FindByTokenHash(store::Transaction& tx,
                                                           const std::string& token_hash);
  /// One page of the hosts by name (`limit` rows from `offset`), each with its instance and pair
  /// fields (Host's "List only" fields), and how many hosts there are.
  static core::Result<std::pair<std::vector<Host>, int64_t>> PageWithPlacementAndPair(
      store::Transaction& tx, int64_t limit, int64_t offset);
  /// Host `name` with its instance and pair fields; nullopt when there is none.
  static core::Result<std::optional<Host>> FindWithPlacementAndPair(store::Transaction& tx,
                                                                    const std::string& name);
  /// How many hosts serve `gpu_type`.
  static core::Result<int64_t> CountOfType(store::Transaction& tx, const std::string& gpu_type);

  /// Stores a new host (not drained, empty inventory) with its agent token's hash.
  static core::Result<void> Insert(store::Transaction& tx, const Host& host,
                                   const std::string& token_hash);
  /// A new agent token (its hash) and `gpu_required`.
  static core::Result<void> SetToken(store::Transaction& tx, const std::string& id,
                                     const std::string& token_hash, bool gpu_required);
  /// Where the relay reaches host `id`'s instances (already checked: CheckSshRegistration).
  static core::Result<void> SetSsh(store::Transaction& tx, const std::string& id,
                                   const SshRegistration& ssh);
  /// Drains; or undrains and clears `degraded_reason` (the operator says it is fixed).
  static core::Result<void> SetDrained(store::Transaction& tx, const std::string& id, bool drained);
  /// What an agent sync learnt about host `id`.
  static core::Result<void> RecordSync(store::Transaction& tx, const std::string& id,
                                       const HostSyncRecord& sync);
  static core::Result<void> Delete(store::Transaction& tx, const std::string& id);

  /// Up to `limit` slots of `gpu_type` whose node-0 host name is ≥ `from_name`, by that name. A
  /// slot of a 1-host type is one usable host holding no placement; a slot of a 2-host type
  /// is one linked pair (host_pair_members) whose two hosts are both usable and free,
  /// node 0 first. Unpaired hosts of a 2-host type are never a slot. Usable: not drained, not
  /// degraded, engine fine, heard from within `unknown_after` seconds before `now`. Types of
  /// other sizes have no slots. Costs one pass over the hosts from `from_name` on (there is no
  /// index on hosts by type).
  static core::Result<std::vector<Slot>> FreeSlots(store::Transaction& tx,
                                                   const std::string& gpu_type,
                                                   int64_t hosts_per_instance, int64_t limit,
                                                   int64_t now, int64_t unknown_after,
                                                   const std::string& from_name = "");
  /// The slots of `gpu_type` that hold one of `host_ids` and can take an instance now (as
  /// FreeSlots says), by node-0 host name, each once: for a 1-host type the hosts themselves,
  /// for a 2-host type the pairs they belong to. Point lookups: O(log n) per host.
  static core::Result<std::vector<Slot>> SlotsOf(store::Transaction& tx,
                                                 const std::string& gpu_type,
                                                 int64_t hosts_per_instance,
                                                 const std::vector<std::string>& host_ids,
                                                 int64_t now, int64_t unknown_after);
  /// The capacity of `gpu_type` whose instances take `hosts_per_instance` hosts.
  static core::Result<Capacity> LoadCapacity(store::Transaction& tx, const std::string& gpu_type,
                                             int64_t hosts_per_instance, int64_t now,
                                             int64_t unknown_after);
};

}  // namespace gpuwerk::sched::internal
