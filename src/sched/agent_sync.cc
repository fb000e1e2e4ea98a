#include "sched/agent_sync.h"

#include <spdlog/spdlog.h>

#include <cctype>
#include <set>
#include <utility>

#include "sched/internal/instance_rows.h"
#include "store/audit_log.h"

namespace gpuwerk::sched {
namespace {

/// Launches of one queue entry after which a failure no longer puts it back in the queue.
constexpr int64_t kMaxQueueLaunchAttempts = 3;

core::Error BadField(const std::string& field) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                     "The sync request's '" + field + "' has the wrong type.")
      .WithDetail("field", field);
}

std::string Str(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

int64_t Int(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

/// A field the agent sent, cut to a sane length (it lands in the store and in the API).
std::string Clip(std::string s, size_t max = 1000) {
  if (s.size() > max) s.resize(max);
  return s;
}

}  // namespace

namespace {

/// Why `host` must get no new instances, from this sync (see Host::degraded_reason); "" if none.
std::string DegradedReason(const Host& host, const nlohmann::json& inventory,
                           const nlohmann::json& failures) {
  static constexpr std::string_view kRuntime = "GPU runtime failed: ";
  // A create that failed in the GPU runtime (C13: "unknown or invalid runtime name: nvidia",
  // "Failed to initialize NVML") makes the host unusable for GPU instances until the operator
  // fixes it and undrains the host.
  for (const auto& f : failures) {
    if (!f.is_object()) continue;
    std::string message = Str(f, "message");
    std::string lower = message;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("nvidia") != std::string::npos || lower.find("nvml") != std::string::npos) {
      return Clip(std::string(kRuntime) + message, 500);
    }
  }
  if (host.degraded_reason.starts_with(kRuntime)) return host.degraded_reason;
  // A host registered with a GPU whose agent sees none (the GPU fell off the bus, the driver is
  // gone): it must not take instances that would run without one.
  auto gpus = inventory.find("gpus");
  if (host.gpu_required && gpus != inventory.end() && gpus->is_array() && gpus->empty()) {
    return Clip("no GPU visible to the agent (nvml: " + Str(inventory, "nvml") + ")", 500);
  }
  return "";
}

/// each node of an instance placed on a linked pair learns the rail addresses: its own
/// (VLLM_HOST_IP), both nodes' and node 0's as the torch.distributed rendezvous (MASTER_ADDR,
/// MASTER_PORT 29500). Nothing for 1-host instances. The pair cannot change while the instance
/// is placed on it, so the environment a container was created with stays true.
core::Result<void> AddPairEnv(store::Transaction& tx, const std::string& instance_id, int64_t node,
                              nlohmann::json& env) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rails,
      tx.Query("SELECT p.node_index, m.rail_address FROM placements p LEFT JOIN "
               "host_pair_members m ON m.host_id = p.host_id WHERE p.instance_id = ? ORDER BY "
               "p.node_index",
               {instance_id}));
  if (rails.size() != 2 || rails[0].Text(1).empty() || rails[1].Text(1).empty() || node < 0 ||
      node > 1) {
    return {};
  }
  const std::string node0 = rails[0].Text(1), node1 = rails[1].Text(1);
  env.push_back("GPUWERK_NODE_COUNT=2");
  env.push_back("GPUWERK_NODE0_ADDR=" + node0);
  env.push_back("GPUWERK_NODE1_ADDR=" + node1);
  env.push_back("VLLM_HOST_IP=" + (node == 0 ? node0 : node1));
  env.push_back("MASTER_ADDR=" + node0);
  env.push_back("MASTER_PORT=29500");
  return {};
}

}  // namespace

core::Result<nlohmann::json> AgentSync::DesiredAnswer(store::Transaction& tx, const Host& host) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto wanted,
      tx.Query("SELECT i.id, p.node_index, i.hostname, i.image, i.public_key, "
               "i.restart_generation, i.name FROM placements p JOIN instances i ON "
               "i.id = p.instance_id WHERE p.host_id = ? AND i.desired = 'running' AND "
               "i.deleted_at IS NULL ORDER BY i.id, p.node_index",
               {host.id}));
  nlohmann::json desired = nlohmann::json::array();
  for (const auto& w : wanted) {
    const int64_t node = w.Int(1);
    std::string hostname = w.Text(2);
    if (node > 0) hostname += "-n" + std::to_string(node);
    nlohmann::json env = nlohmann::json::array(
        {"GPUWERK_INSTANCE=" + w.Text(6), "GPUWERK_NODE_INDEX=" + std::to_string(node)});
    GPUWERK_TRY(AddPairEnv(tx, w.Text(0), node, env));
    desired.push_back({{"instance_id", w.Text(0)},
                       {"node_index", node},
                       {"container_name", "gpuwerk-" + w.Text(0) + "-" + std::to_string(node)},
                       {"hostname", hostname},
                       {"image", w.Text(3)},
                       {"memory_bytes", options_.instance_memory_bytes},
                       {"gpu", host.gpu_required},
                       {"authorized_keys", nlohmann::json::array({w.Text(4)})},
                       {"restart_generation", w.Int(5)},
                       {"env", std::move(env)}});
  }
  return nlohmann::json{{"host_id", host.id},
                        {"sync_interval_seconds", options_.sync_interval_seconds},
                        {"desired", std::move(desired)}};
}

core::Result<nlohmann::json> AgentSync::Sync(const Host& host, const nlohmann::json& request) {
  if (!request.is_object()) return core::Fail(BadField("body"));
  const nlohmann::json empty_array = nlohmann::json::array();
  const nlohmann::json empty_object = nlohmann::json::object();
  auto get = [&](const char* key, bool array) -> core::Result<const nlohmann::json*> {
    auto it = request.find(key);
    if (it == request.end() || it->is_null()) return array ? &empty_array : &empty_object;
    if (array ? !it->is_array() : !it->is_object()) return core::Fail(BadField(key));
    return &*it;
  };
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* containers, get("containers", true));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* failures, get("failures", true));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* inventory, get("inventory", false));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* engine, get("engine", false));
  std::string engine_error;
  if (engine->contains("ok") && (*engine)["ok"].is_boolean() && !(*engine)["ok"].get<bool>()) {
    engine_error = Clip(Str(*engine, "error"));
    if (engine_error.empty()) engine_error = "unavailable";
  }
  const std::string inventory_text =
      Clip(inventory->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 64 * 1024);
  const int64_t now = clock_.NowUnix();
  const int64_t unknown_after = options_.host_unknown_after_seconds;

  const std::string degraded = DegradedReason(host, *inventory, *failures);
  if (degraded != host.degraded_reason && !degraded.empty()) {
    spdlog::warn("sched: host {} is degraded and gets no new instances: {}", host.name, degraded);
  }

  bool host_free = false;
  auto answer = db_.Write([&](store::Transaction& tx) -> core::Result<nlohmann::json> {
    host_free = false;
    GPUWERK_TRY(
        tx.Exec("UPDATE hosts SET last_seen_at = ?, inventory = ?, engine_error = ?, "
                "degraded_reason = ? WHERE id = ?",
                {now, inventory_text, engine_error, degraded, host.id}));
    // Only containers of instances placed on this host are trusted; the agent removes the rest.
    GPUWERK_ASSIGN_OR_RETURN(
        auto placed, tx.Query("SELECT p.instance_id, p.node_index, i.desired FROM placements p "
                              "JOIN instances i ON i.id = p.instance_id WHERE p.host_id = ?",
                              {host.id}));
    std::set<std::pair<std::string, int64_t>> here;
    std::set<std::string> instances_here;
    for (const auto& r : placed) {
      here.insert({r.Text(0), r.Int(1)});
      instances_here.insert(r.Text(0));
    }

    // 1. Failures: the instance is failed, its hosts and billing session freed.
    for (const auto& f : *failures) {
      if (!f.is_object()) continue;
      const std::string id = Str(f, "instance_id");
      if (!here.contains({id, Int(f, "node_index")})) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto row,
                               tx.QueryOne("SELECT desired, billing_session_id, name FROM "
                                           "instances WHERE id = ? AND deleted_at IS NULL",
                                           {id}));
      if (!row) continue;
      const std::string code = Clip(Str(f, "code"), 100);
      const std::string reason = Clip(code + ": " + Str(f, "message"));
      GPUWERK_TRY(tx.Exec("DELETE FROM placements WHERE instance_id = ?", {id}));
      GPUWERK_TRY(tx.Exec("DELETE FROM observed_containers WHERE instance_id = ?", {id}));
      GPUWERK_TRY(
          tx.Exec("UPDATE billing_sessions SET ended_at = ? WHERE id = ? AND ended_at "
                  "IS NULL",
                  {now, row->Text(1)}));
      if (row->Text(0) == "deleted") {
        GPUWERK_TRY(internal::FinalizeIfGone(tx, clock_, rng_, id));
      } else {
        GPUWERK_TRY(
            tx.Exec("UPDATE instances SET status = 'failed', status_reason = ? WHERE "
                    "id = ?",
                    {reason, id}));
        GPUWERK_TRY(store::RecordAudit(
            tx, clock_, rng_,
            {.actor_id = "",
             .action = "instance.fail",
             .target = id,
             .source_address = "system",
             .detail = {{"name", row->Text(2)}, {"host", host.name}, {"code", code}}}));
        // A queue launch that failed on the host: the entry goes back to its old place (its seq
        // never changed) with the failure recorded, unless its owner joined that queue again or
        // it failed kMaxQueueLaunchAttempts times (then it stays launched, its instance failed).
        GPUWERK_ASSIGN_OR_RETURN(
            int64_t requeued,
            tx.Exec("UPDATE queue_entries SET status = 'open', left_at = NULL, last_failure = ? "
                    "WHERE instance_id = ? AND status = 'launched' AND launch_attempts < ? AND NOT "
                    "EXISTS "
                    "(SELECT 1 FROM "
                    "queue_entries o WHERE o.person_id = queue_entries.person_id AND "
                    "o.gpu_type = queue_entries.gpu_type AND o.status = 'open')",
                    {"launch failed on host " + host.name + ": " + reason, id,
                     kMaxQueueLaunchAttempts}));
        if (requeued > 0) {
          GPUWERK_TRY(store::RecordAudit(tx, clock_, rng_,
                                         {.actor_id = "",
                                          .action = "queue.requeue",
                                          .target = id,
                                          .source_address = "system",
                                          .detail = {{"name", row->Text(2)}, {"code", code}}}));
        }
      }
      std::erase_if(here, [&](const auto& p) { return p.first == id; });
      instances_here.erase(id);
    }

    // An agent's first round after its start reports nothing yet ("observed": false): it does
    // not know which containers are its own before this answer names its host. Keep the last
    // observations and statuses.
    const auto observed = request.find("observed");
    if (observed != request.end() && observed->is_boolean() && !observed->get<bool>()) {
      return DesiredAnswer(tx, host);
    }

    // 2. Observations: replace this host's rows by what was reported.
    std::set<std::pair<std::string, int64_t>> reported;
    for (const auto& c : *containers) {
      if (!c.is_object()) continue;
      std::pair<std::string, int64_t> key{Str(c, "instance_id"), Int(c, "node_index")};
      if (!here.contains(key) || reported.contains(key)) continue;
      reported.insert(key);
      auto ready = c.find("ssh_ready");
      GPUWERK_TRY(
          tx.Exec("DELETE FROM observed_containers WHERE instance_id = ? AND "
                  "node_index = ?",
                  {key.first, key.second}));
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO observed_containers (instance_id, node_index, host_id, container_id, "
          "state, exit_code, started_at, ssh_port, ssh_ready, restart_generation, error, "
          "observed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
          {key.first, key.second, host.id, Clip(Str(c, "container_id"), 128),
           Clip(Str(c, "state"), 32), Int(c, "exit_code"), Clip(Str(c, "started_at"), 64),
           Int(c, "ssh_port"),
           int64_t{ready != c.end() && ready->is_boolean() && ready->get<bool>() ? 1 : 0},
           Int(c, "restart_generation"), Clip(Str(c, "error")), now}));
    }
    for (const auto& key : here) {
      if (reported.contains(key)) continue;
      GPUWERK_TRY(
          tx.Exec("DELETE FROM observed_containers WHERE instance_id = ? AND "
                  "node_index = ? AND host_id = ?",
                  {key.first, key.second, host.id}));
    }

    // 3. Deletions whose container is gone here free this host; the last one finalizes.
    for (const auto& r : placed) {
      const std::pair<std::string, int64_t> key{r.Text(0), r.Int(1)};
      if (r.Text(2) != "deleted" || !here.contains(key) || reported.contains(key)) continue;
      GPUWERK_TRY(tx.Exec("DELETE FROM placements WHERE instance_id = ? AND node_index = ?",
                          {key.first, key.second}));
      GPUWERK_ASSIGN_OR_RETURN(bool finalized,
                               internal::FinalizeIfGone(tx, clock_, rng_, key.first));
      if (finalized) instances_here.erase(key.first);
    }

    // 4. Every live instance on the host: store the derived status.
    for (const auto& id : instances_here) {
      GPUWERK_ASSIGN_OR_RETURN(auto in, internal::LoadInstance(tx, id, now, unknown_after));
      if (!in || in->deleted_at) continue;
      GPUWERK_TRY(
          tx.Exec("UPDATE instances SET status = ?, status_reason = ? WHERE id = ? AND "
                  "(status <> ? OR status_reason <> ?)",
                  {in->status, in->status_reason, id, in->status, in->status_reason}));
    }

    GPUWERK_ASSIGN_OR_RETURN(
        auto holding, tx.QueryOne("SELECT COUNT(*) FROM placements WHERE host_id = ?", {host.id}));
    host_free = holding->Int(0) == 0;
    return DesiredAnswer(tx, host);
  });
  if (answer && host_free && capacity_freed_) capacity_freed_(host.gpu_type, host.id);
  return answer;
}

}  // namespace gpuwerk::sched
