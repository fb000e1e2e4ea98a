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

/// Deletes every live instance of `person_id` whose billing session is billed to
/// `billing_account_id` (a team's id), inside the caller's transaction `tx`, as a delete asked by
/// the person would (desired `deleted`, finalised at once when it holds no host): each billing
/// session ends at `at` (Unix seconds), and each delete is audited `instance.delete` with the
/// system as actor, source address "system" and detail {"reason": `reason`}. Instances of the
/// person billed to another account (their own solo ones) are untouched. Returns the names of the
/// hosts to wake (DesiredStateNotifier::Notify) once `tx` commits. Errors: the store's.
core::Result<std::vector<std::string>> DeleteInstancesBilledTo(
    store::Transaction& tx, core::Clock& clock, core::Rng& rng, const std::string& person_id,
    const std::string& billing_account_id, int64_t at, const std::string& reason);

}  // namespace gpuwerk::sched
