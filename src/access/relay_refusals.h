#pragma once

#include <cstdint>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "protocol/relay_messages.h"
#include "store/database.h"

namespace gpuwerk::access {

/// Records one group of refused relay logins (protocol::RelayRefusalGroup: one code, source,
/// key, person and instance, `count` times within a minute) as one audit event
/// `relay_session.refused`: actor the person and target the instance (when the authorizer had
/// let the login through), the group's source address, details {code, user, key_fingerprint,
/// count, first_at, last_at, relay}. A `upstream_host_key_mismatch` group adds one
/// `relay.host_key_mismatch` event for the operator (details {expected, presented,
/// key_fingerprint, count, relay}; docs/ssh.md "Host key pinning").
///
/// Nothing a relay says is trusted beyond itself: its person_id and instance_id become the
/// actor and target only when the store has that instance as that person's (live or deleted);
/// otherwise both events name no actor and no target, and carry the ids as details
/// `claimed_person_id` and `claimed_instance_id` (docs/ssh.md "Refusals of a remote relay").
/// Every text field goes into the events in its bounded printable form (core::BoundedPrintable),
/// escaped once: `user`, which the relay escaped already, is kept as it is when it is in that
/// form (core::IsBoundedPrintable) and escaped here otherwise. Inside the caller's transaction.
/// Errors: the store's.
core::Result<void> RecordRelayRefusal(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                      const std::string& relay,
                                      const protocol::RelayRefusalGroup& group);

/// Records that `relay` left `dropped` refusals of one period out of its report (more kinds than
/// protocol::kMaxRefusalGroups): one audit event `relay_session.refusals_dropped`, actor the
/// system, target the relay's name, details {count}. Nothing for 0. Errors: the store's.
core::Result<void> RecordDroppedRelayRefusals(store::Transaction& tx, core::Clock& clock,
                                              core::Rng& rng, const std::string& relay,
                                              int64_t dropped);

}  // namespace gpuwerk::access
