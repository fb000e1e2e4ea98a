#pragma once

// The named steps of AgentSync::Sync (docs/agent-protocol.md), each usable and testable alone.
// Not for use outside src/sched/.

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "sched/agent_sync.h"
#include "sched/internal/placement_table.h"
#include "sched/sched_options.h"
#include "store/database.h"

namespace gpuwerk::sched::internal {

/// Launches of one queue entry after which a failure no longer puts it back in the queue.
inline constexpr int64_t kMaxQueueLaunchAttempts = 3;

/// One node: (instance id, node index).
using NodeKey = std::pair<std::string, int64_t>;

/// What one sync round works with: its write transaction, the host and the time.
struct SyncContext {
  store::Transaction& tx;
  core::Clock& clock;
  core::Rng& rng;
  const SchedOptions& options;
  const Host& host;
  int64_t now = 0;  ///< Unix seconds
  /// Where mails to instances' owners go (RecordDrift); null: none are sent.
  mail::Outbox* outbox = nullptr;
};

/// The shortest time between two drift mails to the owner of one instance (seconds): a container
/// stopped again and again on its host makes one mail an hour, not one a round.
inline constexpr int64_t kDriftMailIntervalSeconds = 3600;

/// The nodes placed on the host at the start of the round; steps take out what they finish.
struct NodesHere {
  std::vector<PlacedNode> placed;   ///< as read, never changed
  std::set<NodeKey> nodes;          ///< placed nodes still held
  std::set<std::string> instances;  ///< live instances still on the host
};

/// A gpuwerk container that the host's engine runs although the store has not placed it there
/// (C15: store and engine checked against each other). Fields as the agent sent them (bounded by
/// ParseSyncReport, not escaped).
struct StrayContainer {
  std::string instance_id;
  int64_t node_index = 0;
  std::string container_id;
  /// A second (third, …) container of a node placed here, rather than a node not placed here.
  bool duplicate = false;
};

/// How the degraded reason of a host whose engine and store disagree starts (StrayContainers).
inline constexpr std::string_view kStrayReasonPrefix = "store and engine disagree: ";

/// The store against the engine, each sync (C15): the reported containers whose node the store
/// does not place on this host now (`here` after ApplyFailures: never placed here, placed on
/// another host, or no longer, e.g. an instance failed or finally deleted while its container
/// stayed), and each container of a node after its first. In report order. Pure.
std::vector<StrayContainer> StrayContainers(const std::vector<ContainerReport>& containers,
                                            const NodesHere& here);

/// Why `host` must get no new instances after this sync (see Host::degraded_reason); "" if
/// none. In this order: a create failure in the GPU runtime (C13: "nvidia", "nvml" in its message)
/// degrades it until the operator undrains it; containers the store did not place there
/// (`strays`, C15) while the agent reports them, the reason starting with kStrayReasonPrefix and
/// naming up to two (escaped, bounded), kept through a round that observed nothing
/// (`report.observed` false); a host registered with a GPU whose agent sees none. `host` is the
/// row as stored before this sync. At most 500 bytes.
std::string DegradedReason(const Host& host, const SyncReport& report,
                           const std::vector<StrayContainer>& strays = {});

/// Audits a change of the host's degraded reason from `before` to `after`: `host.degraded`
/// (detail: name, reason, previous) when `after` is not empty, `host.degraded_cleared` (detail:
/// name, previous) when it became empty; nothing when unchanged, so a state that lasts many rounds
/// is one entry.
core::Result<void> AuditDegradedChange(SyncContext& ctx, const std::string& before,
                                       const std::string& after);

/// The host's placed nodes (only containers of these are trusted).
core::Result<NodesHere> LoadNodesHere(SyncContext& ctx);

/// Step 1, failures: each failed instance placed here is failed (its hosts and billing session
/// freed, audited) and the queue entry it was launched from goes back to its old place;
/// or, when its delete was asked, finalized. Its nodes leave `here`.
core::Result<void> ApplyFailures(SyncContext& ctx, const std::vector<CreateFailure>& failures,
                                 NodesHere& here);

/// Step 2, observations: stores each reported container of a node placed here (the first
/// report of a node counts) and forgets the nodes placed here that were not reported. A reported
/// sshd port outside the range registered for the host (Host::ssh_port_low/high; issue 12
/// finding 1) is not stored: the container is stored with port 0, not ready, and an error that
/// says why (its instance's status reason), and the first round that reports it logs a warning
/// and records the audit event `host.ssh_port_refused`. Returns the nodes reported.
core::Result<std::set<NodeKey>> RecordObservations(SyncContext& ctx,
                                                   const std::vector<ContainerReport>& containers,
                                                   const NodesHere& here);

/// Step 2b, metering on evidence (R-13, docs/billing.md "Evidence"): for each live or deleting
/// instance whose node 0 is placed here, this round is a sighting of its billing session
/// (billing::RecordSighting inside this transaction): node 0's reported container (its start
/// and finish time, whether it runs) or none. A round whose engine did not answer
/// (SyncReport::engine_error) is no evidence about containers and records nothing; neither does
/// an agent's first round after its start (not observed; AgentSync::Sync skips it).
/// `silent_after`: SchedOptions::host_unknown_after_seconds.
core::Result<void> RecordBillingEvidence(SyncContext& ctx,
                                         const std::vector<ContainerReport>& containers,
                                         const NodesHere& here);

/// Step 3, deletions: a node whose delete was asked and whose container is gone here frees
/// this host; the last node finalizes its instance (which leaves `here`).
core::Result<void> FinishDeletions(SyncContext& ctx, const std::set<NodeKey>& reported,
                                   NodesHere& here);

/// Step 3b, drift: for each change made outside gpuwerk to a container of a live instance placed
/// here whose delete was not asked and that has not failed: the instance's drift (and so its
/// status reason, DriftReason) recorded, an `instance.drift` audit entry, and a mail to its owner
/// unless one went out less than kDriftMailIntervalSeconds ago. Entries for other nodes are
/// skipped. Returns whether a mail was stored.
core::Result<bool> RecordDrift(SyncContext& ctx, const std::vector<DriftItem>& drift,
                               const NodesHere& here);

/// The sentence a person reads for `item` (the status reason and the mail), built from its
/// checked fields only. `nodes`: how many nodes the instance has. Pure.
std::string DriftReason(const DriftItem& item, int64_t nodes);

/// Step 4, statuses: stores the derived status of every live instance still on the host.
core::Result<void> StoreStatuses(SyncContext& ctx, const NodesHere& here);

/// Step, host keys (docs/ssh.md "Host key pinning"): for each reported container of a node placed
/// here (the first report of a node) with an `ssh_host_key` that is an ssh-ed25519 public key: the
/// node's first key is pinned (audit `instance.host_key_pinned`); a key reported for another
/// container than the pinned one (the container was made again) is pinned in its place, audited
/// `instance.host_key_repinned` with both fingerprints, and the owner is mailed (at most once an
/// hour per instance, shared with the drift mail); another key for the pinned container is not
/// taken (the relay keeps requiring the pinned one). Returns whether a mail was stored.
core::Result<bool> PinHostKeys(SyncContext& ctx, const std::vector<ContainerReport>& containers,
                               const NodesHere& here);

/// The answer: host id, sync interval and the host's desired list.
core::Result<nlohmann::json> DesiredAnswer(SyncContext& ctx);

}  // namespace gpuwerk::sched::internal
