#include "sched/internal/sync_steps.h"

#include <spdlog/spdlog.h>

#include <cctype>

#include "audit/audit_log.h"
#include "auth/person_table.h"
#include "billing/billing_session_table.h"
#include "billing/metering.h"
#include "core/strings.h"
#include "keys/key_pair.h"
#include "keys/public_key.h"
#include "protocol/agent_sync.h"
#include "sched/instance_mails.h"
#include "sched/instance_table.h"
#include "sched/internal/cluster_key_table.h"
#include "sched/internal/instance_rows.h"
#include "sched/internal/observed_container_table.h"
#include "sched/internal/queue_entry_table.h"

namespace gpuwerk::sched::internal {
namespace {

/// A field the agent sent, cut to a sane length (it lands in the store and in the API).
std::string Clip(std::string s, size_t max = 1000) {
  if (s.size() > max) s.resize(max);
  return s;
}

std::string Str(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// each node of an instance placed on a linked pair learns the rail addresses: its own
/// (VLLM_HOST_IP), both nodes' and node 0's as the torch.distributed rendezvous (MASTER_ADDR,
/// MASTER_PORT 29500). Nothing for 1-host instances. The pair cannot change while the instance
/// is placed on it, so the environment a container was created with stays true.
core::Result<void> AddPairEnv(store::Transaction& tx, const std::string& instance_id, int64_t node,
                              nlohmann::json& env) {
  GPUWERK_ASSIGN_OR_RETURN(auto rails, PlacementTable::RailsOf(tx, instance_id));
  if (rails.size() != 2 || rails[0].empty() || rails[1].empty() || node < 0 || node > 1) {
    return {};
  }
  const std::string node0 = rails[0], node1 = rails[1];
  env.push_back("GPUWERK_NODE_COUNT=2");
  env.push_back("GPUWERK_NODE0_ADDR=" + node0);
  env.push_back("GPUWERK_NODE1_ADDR=" + node1);
  env.push_back("VLLM_HOST_IP=" + (node == 0 ? node0 : node1));
  env.push_back("MASTER_ADDR=" + node0);
  env.push_back("MASTER_PORT=29500");
  return {};
}

/// what node `node` of an instance placed on a linked pair is told of its cluster
/// (protocol::ClusterSpec, docs/clusters.md): the rail addresses, the rendezvous ports and the
/// instance's own key pairs, made here by the first sync that asks (keys::MakeEd25519KeyPair,
/// stored by ClusterKeyTable; two agents racing keep the first insert). Each node gets only the
/// private key it needs: node 0 the worker key, node 1 its sshd host key. nullopt for an instance
/// not on a pair.
core::Result<std::optional<protocol::ClusterSpec>> ClusterOf(SyncContext& ctx,
                                                             const std::string& instance_id,
                                                             int64_t node) {
  GPUWERK_ASSIGN_OR_RETURN(auto rails, PlacementTable::RailsOf(ctx.tx, instance_id));
  if (rails.size() != 2 || rails[0].empty() || rails[1].empty() || node < 0 || node > 1) {
    return std::optional<protocol::ClusterSpec>();
  }
  GPUWERK_ASSIGN_OR_RETURN(auto stored, ClusterKeyTable::Find(ctx.tx, instance_id));
  if (!stored) {
    GPUWERK_ASSIGN_OR_RETURN(auto worker,
                             keys::MakeEd25519KeyPair(ctx.rng, "gpuwerk-worker-" + instance_id));
    GPUWERK_ASSIGN_OR_RETURN(auto host,
                             keys::MakeEd25519KeyPair(ctx.rng, "gpuwerk-node1-" + instance_id));
    GPUWERK_TRY(ClusterKeyTable::InsertIfAbsent(ctx.tx, instance_id,
                                                {.worker_private_key = worker.private_openssh,
                                                 .worker_public_key = worker.public_line,
                                                 .node1_host_private_key = host.private_openssh,
                                                 .node1_host_public_key = host.public_line},
                                                ctx.clock.NowUnix()));
    GPUWERK_ASSIGN_OR_RETURN(stored, ClusterKeyTable::Find(ctx.tx, instance_id));
    if (!stored) return core::Internal("the cluster keys of " + instance_id + " were not stored");
  }
  protocol::ClusterSpec c{.node_index = static_cast<int>(node),
                          .rail_addresses = rails,
                          .worker_public_key = stored->worker_public_key,
                          .node1_host_public_key = stored->node1_host_public_key};
  if (node == 0) c.worker_private_key = stored->worker_private_key;
  if (node == 1) c.host_private_key = stored->node1_host_private_key;
  return std::optional<protocol::ClusterSpec>(std::move(c));
}

/// A live, not deleted instance failed on the host: failed, audited, its queue entry put back.
core::Result<void> FailInstance(SyncContext& ctx, const InstanceRow& row, const std::string& code,
                                const std::string& reason) {
  GPUWERK_TRY(InstanceTable::SetStatus(ctx.tx, row.id, InstanceStatus::kFailed, reason));
  GPUWERK_TRY(audit::RecordAudit(
      ctx.tx, ctx.clock, ctx.rng,
      {.actor_id = "",
       .action = "instance.fail",
       .target = row.id,
       .source_address = "system",
       .detail = {{"name", row.name}, {"host", ctx.host.name}, {"code", code}}}));
  // A queue launch that failed on the host: the entry goes back to its old place (its seq
  // never changed) with the failure recorded, unless its owner joined that queue again or
  // it failed kMaxQueueLaunchAttempts times (then it stays launched, its instance failed).
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t requeued,
      QueueEntryTable::Requeue(ctx.tx, row.id,
                               "launch failed on host " + ctx.host.name + ": " + reason,
                               kMaxQueueLaunchAttempts));
  if (requeued > 0) {
    GPUWERK_TRY(audit::RecordAudit(ctx.tx, ctx.clock, ctx.rng,
                                   {.actor_id = "",
                                    .action = "queue.requeue",
                                    .target = row.id,
                                    .source_address = "system",
                                    .detail = {{"name", row.name}, {"code", code}}}));
  }
  return {};
}

/// An engine time (RFC 3339) for people: "2026-12-02 01:05:00 UTC"; "" when it is not one, not
/// in UTC, or Docker's "never" (year 1).
std::string EngineTime(const std::string& at) {
  static constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd";
  if (at.size() < kShape.size() || at.starts_with("0001")) return "";
  for (size_t i = 0; i < kShape.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(at[i])) != 0;
    if (kShape[i] == 'd' ? !digit : at[i] != kShape[i]) return "";
  }
  if (!at.ends_with("Z") && !at.ends_with("+00:00")) return "";
  std::string out = at.substr(0, kShape.size());
  out[10] = ' ';
  return out + " UTC";
}

}  // namespace

std::string DriftReason(const DriftItem& d, int64_t nodes) {
  const std::string it =
      nodes > 1 ? "the container of node " + std::to_string(d.node_index) : "its container";
  const std::string at = EngineTime(d.at);
  if (d.kind == "stopped") {
    std::string how = "exit code " + std::to_string(d.exit_code);
    if (d.oom_killed) how += ", killed for want of memory";
    if (!at.empty()) how += ", at " + at;
    return it + " stopped without gpuwerk stopping it (" + how +
           "; a stop on the host, or its main process ended); gpuwerk starts it again, but the "
           "processes that ran in it were ended (its files are kept)";
  }
  if (d.kind == "restarted") {
    return it + " was restarted outside gpuwerk" +
           (at.empty() ? "" : " (started again at " + at + ")") +
           ": the processes that ran in it were ended (its files are kept)";
  }
  if (d.kind == "paused") {
    return it +
           " was paused outside gpuwerk: nothing in it runs until the host's operator "
           "unpauses it";
  }
  if (d.kind == "removed") {
    const std::string keys =
        "its SSH host key is new (a plain ssh to it warns of a changed host key: remove the old "
        "entry with ssh-keygen -R; through the SSH relay the key you see stays the same)";
    if (d.recreated) {
      return it +
             " was removed outside gpuwerk and created again from the image: the files "
             "written since launch are gone, and " +
             keys;
    }
    return it +
           " was removed outside gpuwerk; gpuwerk creates it again from the image: the "
           "files written since launch are gone, and " +
           keys;
  }
  std::string what;
  for (const auto& c : d.changes) {
    const std::string name = c == "memory" ? "memory limit"
                             : c == "cpus" ? "CPU limit"
                             : c == "pids" ? "process limit"
                                           : c;
    what += (what.empty() ? "" : ", ") + name;
  }
  return it + " was changed outside gpuwerk (" + (what.empty() ? "its settings" : what) + ")";
}

core::Result<bool> RecordDrift(SyncContext& ctx, const std::vector<DriftItem>& drift,
                               const NodesHere& here) {
  bool mailed = false;
  for (const auto& d : drift) {
    if (!here.nodes.contains({d.instance_id, d.node_index})) continue;  // not placed here
    GPUWERK_ASSIGN_OR_RETURN(auto row, InstanceTable::Find(ctx.tx, d.instance_id));
    if (!row || row->deleted_at || row->desired != DesiredState::kRunning ||
        row->status == InstanceStatus::kFailed) {
      continue;  // being deleted (the agent removes it), or already failed
    }
    GPUWERK_ASSIGN_OR_RETURN(int64_t nodes, PlacementTable::CountOf(ctx.tx, d.instance_id));
    const std::string reason = DriftReason(d, nodes);
    GPUWERK_TRY(InstanceTable::RecordDrift(ctx.tx, row->id, d.kind, reason, ctx.now));
    const bool mail_due =
        ctx.outbox != nullptr &&
        (!row->drift_mailed_at || ctx.now - *row->drift_mailed_at >= kDriftMailIntervalSeconds);
    bool mail = false;
    if (mail_due) {
      GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(ctx.tx, row->person_id));
      if (email) {
        GPUWERK_TRY(ctx.outbox->Enqueue(
            ctx.tx, InstanceDriftMail(*email, row->name, reason, kDriftMailIntervalSeconds / 60)));
        GPUWERK_TRY(InstanceTable::MarkDriftMailed(ctx.tx, row->id, ctx.now));
        mail = true;
        mailed = true;
      }
    }
    nlohmann::json detail = {{"name", row->name},     {"owner", row->person_id},
                             {"host", ctx.host.name}, {"node", d.node_index},
                             {"kind", d.kind},        {"container_id", d.container_id},
                             {"mailed", mail}};
    if (d.kind == "stopped") {
      detail["exit_code"] = d.exit_code;
      detail["oom_killed"] = d.oom_killed;
    }
    if (d.kind == "removed") {
      detail["recreated"] = d.recreated;
      detail["new_container_id"] = d.new_container_id;
    }
    if (d.kind == "changed") detail["changes"] = d.changes;
    GPUWERK_TRY(audit::RecordAudit(ctx.tx, ctx.clock, ctx.rng,
                                   {.actor_id = "",
                                    .action = "instance.drift",
                                    .target = row->id,
                                    .source_address = "system",
                                    .detail = std::move(detail)}));
  }
  return mailed;
}

std::vector<StrayContainer> StrayContainers(const std::vector<ContainerReport>& containers,
                                            const NodesHere& here) {
  std::vector<StrayContainer> strays;
  std::set<NodeKey> seen;
  for (const auto& c : containers) {
    const NodeKey key{c.instance_id, c.node_index};
    const bool placed = here.nodes.contains(key);
    const bool first = seen.insert(key).second;
    if (placed && first) continue;
    strays.push_back({.instance_id = c.instance_id,
                      .node_index = c.node_index,
                      .container_id = c.container_id,
                      .duplicate = placed});
  }
  return strays;
}

namespace {

/// The degraded reason for `strays` (not empty): how many, up to three named, what follows.
std::string StrayReason(const std::vector<StrayContainer>& strays) {
  // Two named at most, their ids bounded, so that the reason stays within DegradedReason's 500
  // bytes without a cut.
  constexpr size_t kNamed = 2;
  std::string named;
  for (size_t i = 0; i < strays.size() && i < kNamed; ++i) {
    const StrayContainer& s = strays[i];
    named += (i == 0 ? "" : "; ");
    named += std::string(s.duplicate ? "a second container of " : "") + "instance \"" +
             core::BoundedPrintable(s.instance_id, 24) + "\" node " + std::to_string(s.node_index) +
             " (container \"" + core::BoundedPrintable(s.container_id, 12) + "\")";
  }
  if (strays.size() > kNamed) named += "; and " + std::to_string(strays.size() - kNamed) + " more";
  const bool one = strays.size() == 1;
  return std::string(kStrayReasonPrefix) + "the engine runs " + std::to_string(strays.size()) +
         (one ? " gpuwerk container" : " gpuwerk containers") +
         " that the store has not placed on this host: " + named + "; no new instances until " +
         (one ? "it is" : "they are") + " gone";
}

}  // namespace

std::string DegradedReason(const Host& host, const SyncReport& report,
                           const std::vector<StrayContainer>& strays) {
  static constexpr std::string_view kRuntime = "GPU runtime failed: ";
  // A create that failed in the GPU runtime (C13: "unknown or invalid runtime name: nvidia",
  // "Failed to initialize NVML") makes the host unusable for GPU instances until the operator
  // fixes it and undrains the host.
  for (const auto& f : report.failures) {
    std::string lower = f.message;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("nvidia") != std::string::npos || lower.find("nvml") != std::string::npos) {
      return Clip(std::string(kRuntime) + f.message, 500);
    }
  }
  if (host.degraded_reason.starts_with(kRuntime)) return host.degraded_reason;
  // Store and engine disagree (C15): as long as the agent reports a container the store did not
  // place here. A round that observed nothing (the agent's first after its start) cannot tell.
  if (!strays.empty()) return Clip(StrayReason(strays), 500);
  if (!report.observed && host.degraded_reason.starts_with(kStrayReasonPrefix)) {
    return host.degraded_reason;
  }
  // A host registered with a GPU whose agent sees none (the GPU fell off the bus, the driver is
  // gone): it must not take instances that would run without one.
  auto gpus = report.inventory.find("gpus");
  if (host.gpu_required && gpus != report.inventory.end() && gpus->is_array() && gpus->empty()) {
    return Clip("no GPU visible to the agent (nvml: " + Str(report.inventory, "nvml") + ")", 500);
  }
  return "";
}

core::Result<void> AuditDegradedChange(SyncContext& ctx, const std::string& before,
                                       const std::string& after) {
  if (before == after) return {};
  nlohmann::json detail = {{"name", ctx.host.name}, {"previous", before}};
  if (!after.empty()) detail["reason"] = after;
  return audit::RecordAudit(ctx.tx, ctx.clock, ctx.rng,
                            {.actor_id = "",
                             .action = after.empty() ? "host.degraded_cleared" : "host.degraded",
                             .target = ctx.host.id,
                             .source_address = "system",
                             .detail = std::move(detail)});
}

core::Result<NodesHere> LoadNodesHere(SyncContext& ctx) {
  NodesHere here;
  GPUWERK_ASSIGN_OR_RETURN(here.placed, PlacementTable::ListOnHost(ctx.tx, ctx.host.id));
  for (const auto& p : here.placed) {
    here.nodes.insert({p.instance_id, p.node_index});
    here.instances.insert(p.instance_id);
  }
  return here;
}

core::Result<void> ApplyFailures(SyncContext& ctx, const std::vector<CreateFailure>& failures,
                                 NodesHere& here) {
  for (const auto& f : failures) {
    const std::string& id = f.instance_id;
    if (!here.nodes.contains({id, f.node_index})) continue;
    GPUWERK_ASSIGN_OR_RETURN(auto row, InstanceTable::Find(ctx.tx, id));
    if (!row || row->deleted_at) continue;
    const std::string code = Clip(f.code, 100);
    const std::string reason = Clip(code + ": " + f.message);
    GPUWERK_TRY(PlacementTable::DeleteOf(ctx.tx, id));
    GPUWERK_TRY(ObservedContainerTable::DeleteOf(ctx.tx, id));
    GPUWERK_TRY(billing::BillingSessionTable::End(ctx.tx, row->billing_session_id, ctx.now));
    if (row->desired == DesiredState::kDeleted) {
      GPUWERK_TRY(FinalizeIfGone(ctx.tx, ctx.clock, ctx.rng, id));
    } else {
      GPUWERK_TRY(FailInstance(ctx, *row, code, reason));
    }
    std::erase_if(here.nodes, [&](const NodeKey& n) { return n.first == id; });
    here.instances.erase(id);
  }
  return {};
}

core::Result<std::set<NodeKey>> RecordObservations(SyncContext& ctx,
                                                   const std::vector<ContainerReport>& containers,
                                                   const NodesHere& here) {
  std::set<NodeKey> reported;
  const Host& host = ctx.host;
  for (const auto& c : containers) {
    NodeKey key{c.instance_id, c.node_index};
    if (!here.nodes.contains(key) || reported.contains(key)) continue;
    reported.insert(key);
    const bool range_registered = host.ssh_port_high > 0;
    if (c.ssh_port != 0 && range_registered &&
        (c.ssh_port < host.ssh_port_low || c.ssh_port > host.ssh_port_high)) {
      // The relay must never be sent to a port the operator did not give this host: another
      // host's container may answer there (issue 12 finding 1). The port is not stored.
      ContainerReport refused = c;
      refused.ssh_port = 0;
      refused.ssh_ready = false;
      refused.error = "host " + host.name + " reported this instance's sshd on port " +
                      std::to_string(c.ssh_port) + ", outside the ports registered for it (" +
                      std::to_string(host.ssh_port_low) + "-" + std::to_string(host.ssh_port_high) +
                      "); it cannot be reached until the operator checks the host";
      GPUWERK_ASSIGN_OR_RETURN(
          auto before, ObservedContainerTable::ErrorOf(ctx.tx, c.instance_id, c.node_index));
      if (before != refused.error) {
        spdlog::warn(
            "sched: host {} reported instance {} node {} sshd on port {}, outside its "
            "registered ports {}-{}: not stored",
            host.name, core::BoundedPrintable(c.instance_id), c.node_index, c.ssh_port,
            host.ssh_port_low, host.ssh_port_high);
        GPUWERK_TRY(
            audit::RecordAudit(ctx.tx, ctx.clock, ctx.rng,
                               {.actor_id = "",
                                .action = "host.ssh_port_refused",
                                .target = host.id,
                                .source_address = "system",
                                .detail = {{"name", host.name},
                                           {"instance_id", c.instance_id},
                                           {"node_index", c.node_index},
                                           {"port", c.ssh_port},
                                           {"ports", std::to_string(host.ssh_port_low) + "-" +
                                                         std::to_string(host.ssh_port_high)}}}));
      }
      GPUWERK_TRY(ObservedContainerTable::Replace(ctx.tx, refused, host.id, ctx.now));
      continue;
    }
    GPUWERK_TRY(ObservedContainerTable::Replace(ctx.tx, c, host.id, ctx.now));
  }
  for (const auto& key : here.nodes) {
    if (reported.contains(key)) continue;
    GPUWERK_TRY(ObservedContainerTable::DeleteNode(ctx.tx, key.first, key.second, ctx.host.id));
  }
  return reported;
}

core::Result<void> RecordBillingEvidence(SyncContext& ctx,
                                         const std::vector<ContainerReport>& containers,
                                         const NodesHere& here) {
  for (const PlacedNode& p : here.placed) {
    if (p.node_index != 0 || !here.nodes.contains({p.instance_id, 0})) continue;
    GPUWERK_ASSIGN_OR_RETURN(auto row, InstanceTable::Find(ctx.tx, p.instance_id));
    if (!row || row->billing_session_id.empty()) continue;
    billing::Sighting sighting{.now = ctx.now};
    for (const ContainerReport& c : containers) {
      if (c.instance_id != p.instance_id || c.node_index != 0) continue;
      sighting.container_reported = true;
      sighting.container_started = c.started_at;
      sighting.container_running = c.state == "running";
      sighting.container_finished = c.finished_at;
      break;  // the first report of a node counts (RecordObservations)
    }
    GPUWERK_TRY(billing::RecordSighting(ctx.tx, row->billing_session_id, sighting,
                                        ctx.options.host_unknown_after_seconds));
  }
  return {};
}

core::Result<void> FinishDeletions(SyncContext& ctx, const std::set<NodeKey>& reported,
                                   NodesHere& here) {
  for (const auto& p : here.placed) {
    const NodeKey key{p.instance_id, p.node_index};
    if (p.desired != DesiredState::kDeleted || !here.nodes.contains(key) ||
        reported.contains(key)) {
      continue;
    }
    GPUWERK_TRY(PlacementTable::DeleteNode(ctx.tx, key.first, key.second));
    GPUWERK_ASSIGN_OR_RETURN(bool finalized, FinalizeIfGone(ctx.tx, ctx.clock, ctx.rng, key.first));
    if (finalized) here.instances.erase(key.first);
  }
  return {};
}

core::Result<void> StoreStatuses(SyncContext& ctx, const NodesHere& here) {
  for (const auto& id : here.instances) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto in, LoadInstance(ctx.tx, id, ctx.now, ctx.options.host_unknown_after_seconds));
    if (!in || in->deleted_at) continue;
    GPUWERK_TRY(InstanceTable::SetStatus(ctx.tx, id, in->status, in->status_reason));
  }
  return {};
}

core::Result<bool> PinHostKeys(SyncContext& ctx, const std::vector<ContainerReport>& containers,
                               const NodesHere& here) {
  bool mailed = false;
  std::set<NodeKey> seen;
  for (const auto& c : containers) {
    const NodeKey key{c.instance_id, c.node_index};
    if (!here.nodes.contains(key) || !seen.insert(key).second || c.ssh_host_key.empty()) continue;
    auto parsed = keys::ParsePublicKey(c.ssh_host_key);
    if (!parsed || parsed->type != "ssh-ed25519") continue;  // only what the agent reads
    const std::string fingerprint = parsed->Fingerprint();
    GPUWERK_ASSIGN_OR_RETURN(HostKeyPin pin,
                             PlacementTable::HostKeyPinOf(ctx.tx, c.instance_id, c.node_index));
    if (pin.fingerprint == fingerprint && pin.container_id == c.container_id) continue;
    if (!pin.fingerprint.empty() && pin.container_id == c.container_id) {
      // The same container with another key: never taken from the agent's word. The relay keeps
      // requiring the pinned key, and refuses (and records) an sshd that presents another.
      continue;
    }
    GPUWERK_TRY(
        PlacementTable::PinHostKey(ctx.tx, c.instance_id, c.node_index,
                                   {.fingerprint = fingerprint, .container_id = c.container_id}));
    GPUWERK_ASSIGN_OR_RETURN(auto row, InstanceTable::Find(ctx.tx, c.instance_id));
    if (!row) continue;
    nlohmann::json detail = {
        {"name", row->name},    {"owner", row->person_id},        {"host", ctx.host.name},
        {"node", c.node_index}, {"container_id", c.container_id}, {"fingerprint", fingerprint}};
    std::string action = "instance.host_key_pinned";
    if (!pin.fingerprint.empty()) {
      action = "instance.host_key_repinned";
      detail["old_fingerprint"] = pin.fingerprint;
      detail["old_container_id"] = pin.container_id;
      bool mail = false;
      const bool mail_due =
          ctx.outbox != nullptr &&
          (!row->drift_mailed_at || ctx.now - *row->drift_mailed_at >= kDriftMailIntervalSeconds);
      if (mail_due && pin.fingerprint != fingerprint) {
        GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(ctx.tx, row->person_id));
        if (email) {
          GPUWERK_TRY(ctx.outbox->Enqueue(
              ctx.tx,
              InstanceHostKeyMail(*email, row->name, c.node_index, pin.fingerprint, fingerprint)));
          GPUWERK_TRY(InstanceTable::MarkDriftMailed(ctx.tx, row->id, ctx.now));
          mail = true;
          mailed = true;
        }
      }
      detail["mailed"] = mail;
      spdlog::info(
          "sched: instance {} node {} on host {} has a new container; its sshd host key "
          "is pinned again: {} (was {})",
          row->id, c.node_index, ctx.host.name, fingerprint, pin.fingerprint);
    }
    GPUWERK_TRY(audit::RecordAudit(ctx.tx, ctx.clock, ctx.rng,
                                   {.actor_id = "",
                                    .action = action,
                                    .target = row->id,
                                    .source_address = "system",
                                    .detail = std::move(detail)}));
  }
  return mailed;
}

core::Result<nlohmann::json> DesiredAnswer(SyncContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(auto wanted, PlacementTable::DesiredOnHost(ctx.tx, ctx.host.id));
  nlohmann::json desired = nlohmann::json::array();
  for (const auto& w : wanted) {
    const int64_t node = w.node_index;
    std::string hostname = w.hostname;
    if (node > 0) hostname += "-n" + std::to_string(node);
    nlohmann::json env = nlohmann::json::array(
        {"GPUWERK_INSTANCE=" + w.name, "GPUWERK_NODE_INDEX=" + std::to_string(node)});
    GPUWERK_TRY(AddPairEnv(ctx.tx, w.instance_id, node, env));
    nlohmann::json authorized_keys = nlohmann::json::array({w.public_key});
    GPUWERK_ASSIGN_OR_RETURN(auto cluster, ClusterOf(ctx, w.instance_id, node));
    if (cluster) {
      // Node 1's sshd takes the instance's worker key, from node 0's rail address only; the
      // person's key stays first (the agent proves the login with it).
      if (node == 1) {
        authorized_keys.push_back("from=\"" + cluster->rail_addresses[0] + "\" " +
                                  cluster->worker_public_key);
      }
    }
    nlohmann::json entry = {
        {"instance_id", w.instance_id},
        {"node_index", node},
        {"container_name", "gpuwerk-" + w.instance_id + "-" + std::to_string(node)},
        {"hostname", hostname},
        {"image", w.image},
        {"memory_bytes", ctx.options.instance_memory_bytes},
        {"gpu", ctx.host.gpu_required},
        {"authorized_keys", std::move(authorized_keys)},
        {"restart_generation", w.restart_generation},
        {"env", std::move(env)}};
    if (cluster) entry["cluster"] = protocol::ToJson(*cluster);
    desired.push_back(std::move(entry));
  }
  return nlohmann::json{{"host_id", ctx.host.id},
                        {"sync_interval_seconds", ctx.options.sync_interval_seconds},
                        {"desired", std::move(desired)}};
}

}  // namespace gpuwerk::sched::internal
