#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/access_change_feed.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "keys/ssh_key_registry.h"
#include "sched/desired_state_notifier.h"
#include "sched/host_registry.h"
#include "sched/instance_table.h"
#include "sched/launch_gate.h"
#include "sched/page.h"
#include "sched/queue_service.h"
#include "sched/sched_options.h"
#include "sched/states.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// An instance as its owner sees it, with the status derived at read time: a host not
/// heard from for `host_unknown_after_seconds` makes it `unknown` even before the worker marks
/// it so.
struct Instance {
  std::string id;  ///< "ins_…"
  std::string name;
  InstanceStatus status = InstanceStatus::kProvisioning;  ///< derived at read time (R-6)
  std::string status_reason;  ///< why, for people; "" when nothing to say
  std::string hostname;       ///< globally unique, `<name>-<5 base32 chars>`
  std::string gpu_type;
  DesiredState desired = DesiredState::kRunning;
  int64_t restart_generation = 0;
  std::string ssh_key_id;
  std::string ssh_key_name;         ///< "" when the key row is gone
  std::string ssh_key_fingerprint;  ///< "" when the key row is gone
  std::vector<std::string> hosts;   ///< host names, by node index
  /// One node of a 2-host instance, as its own status shows it (R-8, docs/clusters.md).
  struct Node {
    int64_t index = 0;  ///< 0 or 1
    std::string host;   ///< its host's name
    /// provisioning, running, restarting, exited; unknown while its host is silent or its engine
    /// away; deleting once the instance is.
    InstanceStatus status = InstanceStatus::kProvisioning;
  };
  /// Each node of a 2-host instance, by node index; empty for a 1-host instance.
  std::vector<Node> nodes;
  bool gpu_attached = true;  ///< false when a host was registered without a GPU
  /// Node 0's host's sshd address as the operator registered it (Host::ssh_address, never the
  /// agent's report); "" when not placed or none is registered.
  std::string ssh_address;
  /// Node 0's sshd port as its agent reported it, only when inside the host's registered range;
  /// 0 until known, and while outside that range or none is registered.
  int64_t ssh_port = 0;
  /// The SHA256 fingerprint of node 0's sshd host key as pinned at its agent's first report (""
  /// while none is): the relay refuses an sshd that presents another (docs/ssh.md "Host key
  /// pinning").
  std::string ssh_host_key_fingerprint;
  std::string billing_session_id;
  int64_t billing_started_at = 0;  ///< Unix seconds
  int64_t created_at = 0;          ///< Unix seconds
  std::optional<int64_t> deleted_at;
  /// The last change made to its container outside gpuwerk (docs/instances.md "Changes outside
  /// gpuwerk"); nullopt when none ever was.
  struct Drift {
    std::string kind;    ///< "stopped", "restarted", "paused", "removed", "changed"
    std::string reason;  ///< the sentence, as the status reason shows it
    int64_t at = 0;      ///< Unix seconds: when the server heard of it
    int64_t count = 0;   ///< changes outside gpuwerk since the launch
  };
  std::optional<Drift> drift;
};

/// One page of a person's live instances.
using InstancePage = Page<Instance>;

/// An instance with its owner, as an operator's list shows it.
struct OwnedInstance {
  std::string person_id;
  Instance instance;
};

/// One keyset page of everyone's instances (InstanceService::ListAll), newest first.
struct OwnedInstancePage {
  std::vector<OwnedInstance> items;
  int64_t page = 1;   ///< this page's number from the newest (1-based), as of this read
  int64_t pages = 1;  ///< at least 1
  int64_t total = 0;  ///< instances matching the filter
  std::string next;   ///< the cursor of older rows (`before`); "" when none
  std::string prev;   ///< the cursor of newer rows (`after`); "" when none
};

/// A GPU type with its capacity now.
struct GpuType {
  std::string name;
  std::string description;
  int64_t hosts_per_instance = 1;
  int64_t price_minor_per_hour = 0;
  std::string currency;
  /// How many instances a direct create could get right now: free slots (a free usable host,
  /// or for a 2-host type a free linked pair of usable hosts) less the open queue entries of the
  /// type (they come first), never below 0.
  int64_t free_instances = 0;
  /// At least one instance's worth of usable hosts exists, busy or not (a live, undrained,
  /// healthy host; for a 2-host type a linked pair of two). A type that is not online is joined
  /// through its queue even by a direct create.
  bool online = false;
  int64_t online_hosts = 0;  ///< hosts heard from recently, drained or not
  int64_t queued = 0;        ///< open queue entries of the type
  int64_t hosts = 0;         ///< hosts of the type registered
  int64_t pairs = 0;         ///< linked pairs of hosts of the type (2-host types)
};

/// One page of GPU types, by name (the operator's list).
using GpuTypePage = Page<GpuType>;

/// What InstanceService::CreateOrJoinQueue did: exactly one of the two is set.
struct CreateOutcome {
  std::optional<Instance> instance;       ///< created (the type was online)
  std::optional<QueueEntry> queue_entry;  ///< queued instead (the type was not online)
};

/// A person's instances: create (placing them on free hosts atomically), list, show, restart,
/// delete. Desired state lives here; AgentSync feeds back what the hosts observe. Every change
/// is audited. Thread-safe (state lives in the store).
class InstanceService {
 public:
  /// Work done inside a create's write transaction, after the instance is written.
  using InTransaction = std::function<core::Result<void>(store::Transaction&, const Instance&)>;

  /// `notifier` (optional, must outlive the service) is told about every host whose desired
  /// state a create, restart or delete changed, after the change is committed. `gate`
  /// (optional; empty lets everyone) decides inside a create's or restart's transaction whether
  /// the person may launch (R-14: app/ installs the payment method check).
  InstanceService(store::Database& db, core::Clock& clock, core::Rng& rng, SchedOptions options,
                  DesiredStateNotifier* notifier = nullptr, LaunchGate gate = {})
      : db_(db),
        clock_(clock),
        rng_(rng),
        options_(std::move(options)),
        notifier_(notifier),
        gate_(std::move(gate)) {}

  /// Creates an instance and places it, in one transaction: instance, placements (one host per
  /// node, UNIQUE(host_id) so no host is ever given twice, C15), billing session, audit.
  /// Errors: invalid_name (not a DNS label); not_found (no such key of this person);
  /// kInvalidArgument unknown_gpu_type; kAlreadyExists name_taken (a live instance or an open queue
  /// entry has it, R-6); kFailedPrecondition no_capacity (details: gpu_type, queue {"offer":
  /// true}) when the type is online but full; kFailedPrecondition gpu_type_offline (details:
  /// gpu_type) when the type is not online (GpuType::online): the caller joins the queue instead
  /// (issue 5: choosing a type that is not online enters the queue directly; the API does);
  /// the gate's refusal (kPaymentRequired payment_method_required, R-14) when the type is online
  /// and the person may not launch: nothing is created, `in_tx` does not run.
  ///
  /// A host is only free for a direct create when more instances of the type fit than there are
  /// open queue entries for it: the people waiting come first (R-11, docs/queue.md).
  /// `in_tx`, when set, runs inside the create's write transaction with the new instance (e.g.
  /// to store an idempotency record); its error rolls the create back and is returned.
  core::Result<Instance> Create(const std::string& person_id, std::string_view name,
                                std::string_view ssh_key_id, std::string_view gpu_type,
                                const std::string& source_address, const InTransaction& in_tx = {});
  /// Create(), except that a GPU type that is not online (GpuType::online) is joined through
  /// its queue instead (issue 5: QueueService::Join with the same name and key; the entry may
  /// be launched at once). `on_create` runs in the create's transaction, `on_join` in the
  /// join's. Errors: Create's except gpu_type_offline; Join's.
  core::Result<CreateOutcome> CreateOrJoinQueue(QueueService& queue, const std::string& person_id,
                                                std::string_view name, std::string_view ssh_key_id,
                                                std::string_view gpu_type,
                                                const std::string& source_address,
                                                const InTransaction& on_create = {},
                                                const QueueService::InTransaction& on_join = {});
  /// The person's live instances (not yet finally deleted), 15 a page, oldest first.
  /// Errors: invalid_page.
  core::Result<InstancePage> List(const std::string& person_id, int page);
  /// Everyone's instances matching `filter` (an operator's view), newest first, kPageSize a
  /// page, keyset paged: older than cursor `before`, else the page nearest newer than cursor
  /// `after` (the newest page when fewer remain), else the newest (core/keyset.h). Each with its
  /// derived status, as Get shows it. Errors: kInvalidArgument invalid_cursor; the store's.
  core::Result<OwnedInstancePage> ListAll(const InstanceFilter& filter, std::string_view before,
                                          std::string_view after);
  /// One of the person's instances, by id or, failing that, by live name.
  /// Errors: not_found (also for another person's instance, R-19, and once finally deleted).
  core::Result<Instance> Get(const std::string& person_id, std::string_view id_or_name);
  /// Cycles the containers (restart_generation + 1, status `restarting`); same billing session.
  /// Errors: not_found; kFailedPrecondition instance_deleting / instance_failed (C14); the
  /// gate's refusal (kPaymentRequired payment_method_required, R-14): nothing changes.
  core::Result<Instance> Restart(const std::string& person_id, std::string_view id_or_name,
                                 const std::string& source_address);
  /// Asks for the instance's removal: desired `deleted`, status `deleting`, billing session
  /// ended now. The instance is finally deleted (name free, hosts free) when the agents report
  /// its containers gone, or at once when it holds no hosts. A repeated call while deleting
  /// succeeds. Errors: not_found (also once finally deleted).
  core::Result<Instance> Delete(const std::string& person_id, std::string_view id_or_name,
                                const std::string& source_address);
  /// Every GPU type with its capacity now, by name.
  core::Result<std::vector<GpuType>> GpuTypes();
  /// GpuTypes(), 15 a page (1-based), paged in the store. Errors: invalid_page; the store's.
  core::Result<GpuTypePage> GpuTypesPage(int page);
  /// Persists `unknown` for live instances whose hosts were not heard from for
  /// host_unknown_after_seconds before `now_unix`. Returns how many changed. Errors: the store's.
  core::Result<int64_t> MarkUnknownHosts(int64_t now_unix);

  const SchedOptions& options() const { return options_; }

  /// Delete publishes the instance to `feed` once committed (core::AccessChangeFeed: its relay
  /// sessions end at once). Optional; `feed` must outlive the service. Call before use.
  void SetAccessChangeFeed(core::AccessChangeFeed* feed) { access_changes_ = feed; }

 private:
  /// Create(); nullopt when the type is not online (nothing created).
  core::Result<std::optional<Instance>> CreateIfOnline(
      const std::string& person_id, std::string_view name, std::string_view ssh_key_id,
      std::string_view gpu_type, const std::string& source_address, const InTransaction& in_tx);
  /// One try of CreateIfOnline in one write transaction.
  core::Result<std::optional<Instance>> CreateOnce(
      const std::string& person_id, const std::string& name, const std::string& ssh_key_id,
      const std::string& gpu_type, const std::string& source_address, const InTransaction& in_tx);
  /// `types` with their capacity and queue now, within `tx`.
  core::Result<std::vector<GpuType>> GpuTypesNow(store::Transaction& tx,
                                                 const std::vector<GpuTypeConfig>& types,
                                                 int64_t now);
  /// A change to a live instance inside its write transaction, given its row and the time.
  using LiveChange =
      std::function<core::Result<void>(store::Transaction&, const InstanceRow&, int64_t now)>;
  /// Finds `person_id`'s live instance by id or name, applies `change` and answers the instance
  /// as it is then, in one write transaction; then wakes its hosts. Errors: not_found;
  /// `change`'s.
  core::Result<Instance> ChangeLive(const std::string& person_id, std::string_view id_or_name,
                                    const LiveChange& change);
  void WakeHost(const Instance& instance);

  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  SchedOptions options_;
  DesiredStateNotifier* notifier_;
  LaunchGate gate_;
  core::AccessChangeFeed* access_changes_ = nullptr;
};

/// What holds `person_id`'s SSH key `key_id`: their live instances and open queue entries,
/// by name. What keys::SshKeyRegistry asks before a delete (app/ wires it in). Errors: the
/// store's.
core::Result<keys::KeyUse> KeyUsers(store::Transaction& tx, const std::string& person_id,
                                    const std::string& key_id);

}  // namespace gpuwerk::sched
