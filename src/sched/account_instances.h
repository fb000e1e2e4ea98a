#pragma once

// What the scheduler does when a person stops being billed to an account (R-15: a member who
// leaves or is removed from a team): their instances billed to that account are deleted, their
// billing sessions ending at that moment. app/ calls it from teams::TeamHooks::member_left, inside
// the membership change's transaction.

#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// What DeleteInstancesBilledTo deleted.
struct DeletedInstances {
  std::vector<std::string> instance_ids;  ///< "ins_…", each marked deleting
  /// The names of the hosts to wake (DesiredStateNotifier::Notify) once the transaction commits.
  std::vector<std::string> hosts;
};

/// Deletes every live instance of `person_id` whose billing session is billed to
/// `billing_account_id` (a team's id), inside the caller's transaction `tx`, as a delete asked by
/// the person would (desired `deleted`, finalised at once when it holds no host): each billing
/// session ends at `at` (Unix seconds), and each delete is audited `instance.delete` with the
/// system as actor, source address "system" and detail {"reason": `reason`}. Instances of the
/// person billed to another account (their own solo ones) are untouched. Returns the instances
/// deleted and the hosts to wake: the caller tells the hosts and publishes the instances to the
/// core::AccessChangeFeed (their relay sessions end) once `tx` commits. Errors: the store's.
core::Result<DeletedInstances> DeleteInstancesBilledTo(store::Transaction& tx, core::Clock& clock,
                                                       core::Rng& rng, const std::string& person_id,
                                                       const std::string& billing_account_id,
                                                       int64_t at, const std::string& reason);

}  // namespace gpuwerk::sched
