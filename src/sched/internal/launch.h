#pragma once

// The one way an instance comes to exist: shared by InstanceService::Create (a person asks) and
// QueueService::Drain (a queue entry's turn came). Not for use outside src/sched/.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "sched/host_registry.h"
#include "sched/sched_options.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// The GPU type named `gpu_type`. Errors: kInvalidArgument unknown_gpu_type; the store's.
core::Result<GpuTypeConfig> LoadType(store::Transaction& tx, const std::string& gpu_type);

/// fails kAlreadyExists name_taken when `person_id` has a live instance or an open queue
/// entry (other than `except_entry_id`) named `name`.
core::Result<void> CheckNameFree(store::Transaction& tx, const std::string& person_id,
                                 const std::string& name, const std::string& except_entry_id = "");

/// Fails not_found unless SSH key `ssh_key_id` is `person_id`'s; returns its public key line.
core::Result<std::string> OwnKeyLine(store::Transaction& tx, const std::string& person_id,
                                     const std::string& ssh_key_id);

/// What to launch.
struct LaunchSpec {
  std::string person_id;
  std::string name;
  std::string ssh_key_id;
  std::string gpu_type;
  std::vector<std::string> host_ids;  ///< one per node, `hosts_per_instance` of them
  std::string actor_id;               ///< who is audited ("" for the system: a queue launch)
  std::string source_address;         ///< the caller's address, or "queue"
  nlohmann::json audit_detail = nlohmann::json::object();  ///< extra audit facts
};

/// Inserts the instance, its placements (UNIQUE(host_id): a host taken meanwhile fails with
/// the store's constraint violation), its billing session and the `instance.create`
/// audit event, all in `tx`. Returns the instance id ("ins_…"). Errors: kNotFound not_found (no
/// such key of this person); unknown_gpu_type; the store's.
core::Result<std::string> InsertInstance(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                         const SchedOptions& options, const LaunchSpec& spec);

}  // namespace gpuwerk::sched::internal
