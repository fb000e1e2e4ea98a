#include "sched/agent_sync.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "core/host_address.h"
#include "core/strings.h"
#include "sched/internal/host_table.h"
#include "sched/internal/placement_table.h"
#include "sched/internal/sync_steps.h"

namespace gpuwerk::sched {
namespace {

core::Error BadValue(const std::string& field, const std::string& what) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                     "The sync request's '" + field + "' must be " + what + ".")
      .WithDetail("field", field);
}

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

/// Refuses a member of `object` not named in `names` (R-19: unknown fields are refused; the
/// members are protocol::AgentSyncRequest's, docs/agent-protocol.md). `path` prefixes the name.
core::Result<void> OnlyMembers(const nlohmann::json& object,
                               std::initializer_list<std::string_view> names,
                               const std::string& path) {
  if (!object.is_object()) return {};
  for (const auto& [key, value] : object.items()) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                    "The sync request has an unknown field '" + path + key + "'.")
                            .WithDetail("field", path + key));
    }
  }
  return {};
}

/// A field the agent sent, cut to a sane length (it lands in the store and in the API).
std::string Clip(std::string s, size_t max = 1000) {
  if (s.size() > max) s.resize(max);
  return s;
}

core::Error DriftField(const std::string& field, const std::string& what) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                     "The sync request's '" + field + "' " + what + ".")
      .WithDetail("field", field);
}

/// One entry of `drift`, strictly: every member present with its type (R-19; the agent's
/// protocol::DriftReport).
core::Result<DriftItem> ParseDrift(const nlohmann::json& d, const std::string& path) {
  if (!d.is_object()) return core::Fail(DriftField(path, "must be an object"));
  GPUWERK_TRY(OnlyMembers(d,
                          {"instance_id", "node_index", "kind", "container_id", "exit_code",
                           "oom_killed", "at", "recreated", "new_container_id", "changes"},
                          path + "."));
  auto member = [&](const char* key,
                    nlohmann::json::value_t type) -> core::Result<const nlohmann::json*> {
    auto it = d.find(key);
    const bool ok = it != d.end() &&
                    (it->type() == type ||
                     (type == nlohmann::json::value_t::number_integer && it->is_number_integer()));
    if (!ok) return core::Fail(DriftField(path + "." + key, "is missing or has the wrong type"));
    return &*it;
  };
  using T = nlohmann::json::value_t;
  DriftItem item;
  GPUWERK_ASSIGN_OR_RETURN(auto instance_id, member("instance_id", T::string));
  item.instance_id = instance_id->get<std::string>();
  GPUWERK_ASSIGN_OR_RETURN(auto node, member("node_index", T::number_integer));
  item.node_index = node->get<int64_t>();
  GPUWERK_ASSIGN_OR_RETURN(auto kind, member("kind", T::string));
  item.kind = kind->get<std::string>();
  static constexpr std::string_view kKinds[] = {"stopped", "restarted", "paused", "removed",
                                                "changed"};
  if (std::find(std::begin(kKinds), std::end(kKinds), item.kind) == std::end(kKinds)) {
    return core::Fail(DriftField(path + ".kind", "is not a kind of drift"));
  }
  GPUWERK_ASSIGN_OR_RETURN(auto container, member("container_id", T::string));
  item.container_id = Clip(container->get<std::string>(), 128);
  GPUWERK_ASSIGN_OR_RETURN(auto exit_code, member("exit_code", T::number_integer));
  item.exit_code = exit_code->get<int64_t>();
  GPUWERK_ASSIGN_OR_RETURN(auto oom, member("oom_killed", T::boolean));
  item.oom_killed = oom->get<bool>();
  GPUWERK_ASSIGN_OR_RETURN(auto at, member("at", T::string));
  item.at = Clip(at->get<std::string>(), 64);
  GPUWERK_ASSIGN_OR_RETURN(auto recreated, member("recreated", T::boolean));
  item.recreated = recreated->get<bool>();
  GPUWERK_ASSIGN_OR_RETURN(auto new_id, member("new_container_id", T::string));
  item.new_container_id = Clip(new_id->get<std::string>(), 128);
  GPUWERK_ASSIGN_OR_RETURN(auto changes, member("changes", T::array));
  static constexpr std::string_view kChanges[] = {"name", "image", "memory", "cpus", "pids"};
  for (size_t i = 0; i < changes->size(); ++i) {
    const nlohmann::json& c = (*changes)[i];
    if (!c.is_string() || std::find(std::begin(kChanges), std::end(kChanges),
                                    c.get<std::string>()) == std::end(kChanges)) {
      return core::Fail(
          DriftField(path + ".changes[" + std::to_string(i) + "]", "is not a kind of change"));
    }
    item.changes.push_back(c.get<std::string>());
  }
  return item;
}

}  // namespace

core::Result<SyncReport> ParseSyncReport(const nlohmann::json& request) {
  if (!request.is_object()) return core::Fail(BadField("body"));
  const nlohmann::json empty_array = nlohmann::json::array();
  const nlohmann::json empty_object = nlohmann::json::object();
  auto get = [&](const char* key, bool array) -> core::Result<const nlohmann::json*> {
    auto it = request.find(key);
    if (it == request.end() || it->is_null()) return array ? &empty_array : &empty_object;
    if (array ? !it->is_array() : !it->is_object()) return core::Fail(BadField(key));
    return &*it;
  };
  GPUWERK_TRY(OnlyMembers(
      request,
      {"agent_version", "inventory", "engine", "containers", "failures", "observed", "drift"}, ""));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* containers, get("containers", true));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* drift, get("drift", true));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* failures, get("failures", true));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* inventory, get("inventory", false));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* engine, get("engine", false));
  GPUWERK_TRY(OnlyMembers(*inventory,
                          {"gpus", "memory_bytes", "cpus", "addresses", "rail_addresses",
                           "ssh_address", "nvml", "limits"},
                          "inventory."));
  GPUWERK_TRY(OnlyMembers(*engine, {"ok", "error"}, "engine."));
  // The address sshd ports are published on goes into the commands people are shown and run:
  // a plain IP literal or DNS name only (issue 12: a host's `-oProxyCommand=…` ran locally).
  if (auto a = inventory->find("ssh_address"); a != inventory->end() && !a->is_null()) {
    if (!a->is_string() ||
        (!a->get<std::string>().empty() && !core::IsHostAddress(a->get<std::string>()))) {
      return core::Fail(BadValue("inventory.ssh_address", "an IP address or a DNS name"));
    }
  }
  for (size_t i = 0; i < containers->size(); ++i) {
    GPUWERK_TRY(OnlyMembers(
        (*containers)[i],
        {"instance_id", "node_index", "container_id", "state", "exit_code", "started_at",
         "finished_at", "ssh_port", "ssh_ready", "restart_generation", "error", "ssh_host_key"},
        "containers[" + std::to_string(i) + "]."));
    if (auto p = (*containers)[i].find("ssh_port");
        p != (*containers)[i].end() && !p->is_null() &&
        (!p->is_number_integer() || p->get<int64_t>() < 0 || p->get<int64_t>() > 65535)) {
      return core::Fail(
          BadValue("containers[" + std::to_string(i) + "].ssh_port", "a port from 0 to 65535"));
    }
  }
  for (size_t i = 0; i < failures->size(); ++i) {
    GPUWERK_TRY(OnlyMembers((*failures)[i], {"instance_id", "node_index", "code", "message"},
                            "failures[" + std::to_string(i) + "]."));
  }
  SyncReport report;
  for (size_t i = 0; i < drift->size(); ++i) {
    GPUWERK_ASSIGN_OR_RETURN(DriftItem item,
                             ParseDrift((*drift)[i], "drift[" + std::to_string(i) + "]"));
    report.drift.push_back(std::move(item));
  }
  const auto observed = request.find("observed");
  report.observed =
      !(observed != request.end() && observed->is_boolean() && !observed->get<bool>());
  for (const auto& c : *containers) {
    if (!c.is_object()) continue;
    auto ready = c.find("ssh_ready");
    report.containers.push_back(
        {.instance_id = Str(c, "instance_id"),
         .node_index = Int(c, "node_index"),
         .container_id = Clip(Str(c, "container_id"), 128),
         .state = Clip(Str(c, "state"), 32),
         .exit_code = Int(c, "exit_code"),
         .started_at = Clip(Str(c, "started_at"), 64),
         .finished_at = Clip(Str(c, "finished_at"), 64),
         .ssh_port = Int(c, "ssh_port"),
         .ssh_ready = ready != c.end() && ready->is_boolean() && ready->get<bool>(),
         .restart_generation = Int(c, "restart_generation"),
         .error = Clip(Str(c, "error")),
         .ssh_host_key = Clip(Str(c, "ssh_host_key"), 512)});
  }
  for (const auto& f : *failures) {
    if (!f.is_object()) continue;
    report.failures.push_back({.instance_id = Str(f, "instance_id"),
                               .node_index = Int(f, "node_index"),
                               .code = Str(f, "code"),
                               .message = Str(f, "message")});
  }
  report.inventory = *inventory;
  report.inventory_text =
      Clip(inventory->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 64 * 1024);
  if (engine->contains("ok") && (*engine)["ok"].is_boolean() && !(*engine)["ok"].get<bool>()) {
    report.engine_error = Clip(Str(*engine, "error"));
    if (report.engine_error.empty()) report.engine_error = "unavailable";
  }
  return report;
}

core::Result<nlohmann::json> AgentSync::Sync(const Host& host, const nlohmann::json& request) {
  GPUWERK_ASSIGN_OR_RETURN(const SyncReport report, ParseSyncReport(request));
  const int64_t now = clock_.NowUnix();
  bool host_free = false;
  bool mailed = false;
  std::string degraded_before, degraded;
  auto answer = db_.Write([&](store::Transaction& tx) -> core::Result<nlohmann::json> {
    host_free = false;
    mailed = false;
    // The host as stored now (`host` was read before this transaction): its degraded reason is
    // what this round changes, once per change of state.
    GPUWERK_ASSIGN_OR_RETURN(auto stored, internal::HostTable::FindByName(tx, host.name));
    const Host& current = stored && stored->id == host.id ? *stored : host;
    degraded_before = current.degraded_reason;
    internal::SyncContext ctx{.tx = tx,
                              .clock = clock_,
                              .rng = rng_,
                              .options = options_,
                              .host = current,
                              .now = now,
                              .outbox = outbox_};
    GPUWERK_ASSIGN_OR_RETURN(internal::NodesHere here, internal::LoadNodesHere(ctx));
    GPUWERK_TRY(internal::ApplyFailures(ctx, report.failures, here));
    // Store and engine checked against each other (C15): a container the store did not place
    // here (or no longer does) degrades the host while the agent reports it.
    const std::vector<internal::StrayContainer> strays =
        report.observed ? internal::StrayContainers(report.containers, here)
                        : std::vector<internal::StrayContainer>{};
    degraded = internal::DegradedReason(current, report, strays);
    GPUWERK_TRY(internal::HostTable::RecordSync(tx, host.id,
                                                {.last_seen_at = now,
                                                 .inventory = report.inventory_text,
                                                 .engine_error = report.engine_error,
                                                 .degraded_reason = degraded}));
    GPUWERK_TRY(internal::AuditDegradedChange(ctx, degraded_before, degraded));
    // An agent's first round after its start reports nothing yet ("observed": false): it does
    // not know which containers are its own before this answer names its host. Keep the last
    // observations and statuses.
    if (!report.observed) return internal::DesiredAnswer(ctx);
    GPUWERK_ASSIGN_OR_RETURN(auto reported,
                             internal::RecordObservations(ctx, report.containers, here));
    // Metering on evidence: before deletions finish, so a session's last sighting is this
    // round. An engine that did not answer says nothing about containers.
    if (report.engine_error.empty()) {
      GPUWERK_TRY(internal::RecordBillingEvidence(ctx, report.containers, here));
    }
    GPUWERK_TRY(internal::FinishDeletions(ctx, reported, here));
    GPUWERK_ASSIGN_OR_RETURN(mailed, internal::RecordDrift(ctx, report.drift, here));
    GPUWERK_ASSIGN_OR_RETURN(const bool key_mailed,
                             internal::PinHostKeys(ctx, report.containers, here));
    mailed = mailed || key_mailed;
    GPUWERK_TRY(internal::StoreStatuses(ctx, here));
    GPUWERK_ASSIGN_OR_RETURN(int64_t holding, internal::PlacementTable::CountOnHost(tx, host.id));
    host_free = holding == 0;
    return internal::DesiredAnswer(ctx);
  });
  if (answer && degraded != degraded_before) {
    if (degraded.empty()) {
      spdlog::info("sched: host {} is no longer degraded (was: {})", host.name,
                   core::BoundedPrintable(degraded_before, 600));
    } else {
      spdlog::warn("sched: host {} is degraded and gets no new instances: {}", host.name,
                   core::BoundedPrintable(degraded, 600));
    }
  }
  if (answer && host_free && capacity_freed_) capacity_freed_(host.gpu_type, host.id);
  if (answer && mailed && mail_wake_) mail_wake_();
  return answer;
}

}  // namespace gpuwerk::sched
