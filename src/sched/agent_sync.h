#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/outbox.h"
#include "sched/host_registry.h"
#include "sched/sched_options.h"
#include "store/database.h"

namespace gpuwerk::sched {

/// One container as an agent reports it in a sync (docs/agent-protocol.md), fields bounded.
struct ContainerReport {
  std::string instance_id;
  int64_t node_index = 0;
  std::string container_id;  ///< at most 128 bytes
  std::string state;         ///< engine state, at most 32 bytes
  int64_t exit_code = 0;
  std::string started_at;  ///< at most 64 bytes
  /// The engine's last finish time of the container ("" when the agent did not send it, Docker's
  /// year 1 when it never finished); at most 64 bytes. Billing's evidence (docs/billing.md).
  std::string finished_at;
  int64_t ssh_port = 0;
  bool ssh_ready = false;
  int64_t restart_generation = 0;  ///< the generation applied to the container
  std::string error;               ///< at most 1000 bytes
  /// Its sshd's host key as the agent read it ("ssh-ed25519 BASE64"); "" when not reported. At
  /// most 512 bytes; checked (keys::ParsePublicKey) before it is pinned.
  std::string ssh_host_key;
};

/// A container create that failed on the host, as its agent reports it (unbounded: the sync
/// cuts what it stores).
struct CreateFailure {
  std::string instance_id;
  int64_t node_index = 0;
  std::string code;
  std::string message;
};

/// A change made to a container outside gpuwerk, as its agent reports it in the sync's `drift`
/// (docs/agent-protocol.md "Drift"): checked (ParseSyncReport refuses a malformed one) and
/// bounded.
struct DriftItem {
  std::string instance_id;
  int64_t node_index = 0;
  std::string kind;          ///< "stopped", "restarted", "paused", "removed" or "changed"
  std::string container_id;  ///< at most 128 bytes
  int64_t exit_code = 0;
  bool oom_killed = false;
  std::string at;  ///< as the engine sent it, at most 64 bytes
  bool recreated = false;
  std::string new_container_id;      ///< at most 128 bytes
  std::vector<std::string> changes;  ///< "name", "image", "memory", "cpus", "pids"
};

/// One sync request of an agent as plain values (docs/agent-protocol.md). A field of the wrong
/// type inside an entry reads as empty; entries that are not objects are dropped.
struct SyncReport {
  /// false on an agent's first round after its start: it reports nothing yet.
  bool observed = true;
  std::vector<ContainerReport> containers;
  std::vector<CreateFailure> failures;
  std::vector<DriftItem> drift;  ///< optional in the request (older agents send none)
  nlohmann::json inventory = nlohmann::json::object();  ///< as sent
  std::string inventory_text;                           ///< `inventory` serialised, at most 64 KiB
  std::string engine_error;  ///< "" when the engine is fine; at most 1000 bytes
};

/// Parses a sync request. Errors: kInvalidArgument invalid_field (details: field) when it is
/// not an object, or `containers` / `failures` / `drift` is not an array, or `inventory` /
/// `engine` not an object (each may be absent or null); or a `drift` entry is not an object with
/// exactly its members, each of its type, a known `kind` and known `changes` (details: field, e.g.
/// "drift[0].kind").
core::Result<SyncReport> ParseSyncReport(const nlohmann::json& request);

/// The server half of docs/agent-protocol.md (v1): one sync round of one host's agent.
/// Thread-safe (state lives in the store).
class AgentSync {
 public:
  /// Called with a host's GPU type and id after a sync that left the host free (a failure or a
  /// finished delete freed it, or it had nothing placed): capacity may be there for the queue
  /// (QueueService::Drain(gpu_type, {host_id})). Runs on the syncing thread after the commit.
  using CapacityFreed =
      std::function<void(const std::string& gpu_type, const std::string& host_id)>;

  /// `outbox` (optional) stores the mails to instances' owners about changes made outside
  /// gpuwerk, in the sync's transaction; `mail_wake` is called after a commit that stored one.
  AgentSync(store::Database& db, core::Clock& clock, core::Rng& rng, SchedOptions options,
            CapacityFreed capacity_freed = {}, mail::Outbox* outbox = nullptr,
            std::function<void()> mail_wake = {})
      : db_(db),
        clock_(clock),
        rng_(rng),
        options_(std::move(options)),
        capacity_freed_(std::move(capacity_freed)),
        outbox_(outbox),
        mail_wake_(std::move(mail_wake)) {}

  /// In one transaction: records the host's last_seen_at, inventory and engine error; stores
  /// the observed containers of instances placed on `host`; marks instances whose creation
  /// failed `failed` (placement freed, billing session ended) and puts the queue entry they were
  /// launched from back at its old place with the failure recorded (R-11, issue 5); finally deletes
  /// instances whose deletion was asked and whose containers are gone; records drift (a change
  /// made outside gpuwerk: the instance's status reason, an audit entry, a mail to its owner at
  /// most once an hour: RecordDrift); derives every live instance's status on the host. Returns the
  /// response object: host_id, sync_interval_seconds and the desired list. Malformed container or
  /// failure entries are skipped, never trusted. Errors: kInvalidArgument invalid_field when
  /// `request` is not an object of the right shape.
  core::Result<nlohmann::json> Sync(const Host& host, const nlohmann::json& request);

 private:
  store::Database& db_;
  core::Clock& clock_;
  core::Rng& rng_;
  SchedOptions options_;
  CapacityFreed capacity_freed_;
  mail::Outbox* outbox_;
  std::function<void()> mail_wake_;
};

}  // namespace gpuwerk::sched
