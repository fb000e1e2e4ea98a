#include "sched/internal/sync_steps.h"

#include <cctype>

#include "audit/audit_log.h"
#include "sched/instance_table.h"
#include "sched/internal/billing_session_table.h"
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

}  // namespace

std::string DegradedReason(const Host& host, const SyncReport& report) {
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
  // A host registered with a GPU whose agent sees none (the GPU fell off the bus, the driver is
  // gone): it must not take instances that would run without one.
  auto gpus = report.inventory.find("gpus");
  if (host.gpu_required && gpus != report.inventory.end() && gpus->is_array() && gpus->empty()) {
    return Clip("no GPU visible to the agent (nvml: " + Str(report.inventory, "nvml") + ")", 500);
  }
  return "";
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
    GPUWERK_TRY(BillingSessionTable::End(ctx.tx, row->billing_session_id, ctx.now));
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
  for (const auto& c : containers) {
    NodeKey key{c.instance_id, c.node_index};
    if (!here.nodes.contains(key) || reported.contains(key)) continue;
    reported.insert(key);
    GPUWERK_TRY(ObservedContainerTable::Replace(ctx.tx, c, ctx.host.id, ctx.now));
  }
  for (const auto& key : here.nodes) {
    if (reported.contains(key)) continue;
    GPUWERK_TRY(ObservedContainerTable::DeleteNode(ctx.tx, key.first, key.second, ctx.host.id));
  }
  return reported;
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
    desired.push_back({{"instance_id", w.instance_id},
                       {"node_index", node},
                       {"container_name", "gpuwerk-" + w.instance_id + "-" + std::to_string(node)},
                       {"hostname", hostname},
                       {"image", w.image},
                       {"memory_bytes", ctx.options.instance_memory_bytes},
                       {"gpu", ctx.host.gpu_required},
                       {"authorized_keys", nlohmann::json::array({w.public_key})},
                       {"restart_generation", w.restart_generation},
                       {"env", std::move(env)}});
  }
  return nlohmann::json{{"host_id", ctx.host.id},
                        {"sync_interval_seconds", ctx.options.sync_interval_seconds},
                        {"desired", std::move(desired)}};
}

}  // namespace gpuwerk::sched::internal
