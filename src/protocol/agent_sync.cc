#include "protocol/agent_sync.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "core/host_address.h"
#include "protocol/internal/json_fields.h"

namespace gpuwerk::protocol {
namespace {

using internal::FieldError;
using internal::FieldReader;

/// Reads array member `name` of `r` with `parse(element, path)` for each element.
template <class T, class Parse>
core::Result<std::vector<T>> ListOf(const FieldReader& r, std::string_view name, Parse parse) {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* array, r.Array(name));
  std::vector<T> out;
  out.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    GPUWERK_ASSIGN_OR_RETURN(T value, parse((*array)[i], r.Path(name, i)));
    out.push_back(std::move(value));
  }
  return out;
}

template <class T>
nlohmann::json JsonList(const std::vector<T>& items) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& item : items) out.push_back(ToJson(item));
  return out;
}

core::Result<int> IntField(const FieldReader& r, std::string_view name) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t v, r.IntIn(name, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  return static_cast<int>(v);
}

core::Result<std::string> NonEmpty(const FieldReader& r, std::string_view name) {
  GPUWERK_ASSIGN_OR_RETURN(std::string v, r.String(name));
  if (v.empty()) return core::Fail(FieldError(r.Path(name), "must not be empty"));
  return v;
}

}  // namespace

nlohmann::json ToJson(const Gpu& g) {
  return {{"name", g.name}, {"uuid", g.uuid}, {"memory_bytes", g.memory_bytes}};
}

nlohmann::json ToJson(const Inventory& inv) {
  nlohmann::json j = {{"gpus", JsonList(inv.gpus)},
                      {"memory_bytes", inv.memory_bytes},
                      {"cpus", inv.cpus},
                      {"addresses", inv.addresses},
                      {"rail_addresses", inv.rail_addresses},
                      {"ssh_address", inv.ssh_address},
                      {"nvml", inv.nvml},
                      {"limits",
                       {{"memory_bytes", inv.limits.memory_bytes},
                        {"nano_cpus", inv.limits.nano_cpus},
                        {"pids_limit", inv.limits.pids_limit},
                        {"capabilities", inv.limits.capabilities},
                        {"not_enforced", inv.limits.not_enforced}}}};
  if (!inv.limits.docker_inside.empty()) {
    j["limits"]["docker_inside"] = inv.limits.docker_inside;
  }
  if (inv.limits.shm_bytes != 0) j["limits"]["shm_bytes"] = inv.limits.shm_bytes;
  return j;
}

nlohmann::json ToJson(const EngineHealth& e) { return {{"ok", e.ok}, {"error", e.error}}; }

nlohmann::json ToJson(const ContainerReport& r) {
  nlohmann::json j = {{"instance_id", r.instance_id},
                      {"node_index", r.node_index},
                      {"container_id", r.container_id},
                      {"state", r.state},
                      {"exit_code", r.exit_code},
                      {"started_at", r.started_at},
                      {"ssh_port", r.ssh_port},
                      {"ssh_ready", r.ssh_ready},
                      {"restart_generation", r.restart_generation},
                      {"error", r.error}};
  // Only when known: a server from before host keys refuses the member.
  if (!r.ssh_host_key.empty()) j["ssh_host_key"] = r.ssh_host_key;
  if (!r.finished_at.empty()) j["finished_at"] = r.finished_at;
  return j;
}

nlohmann::json ToJson(const CreateFailure& f) {
  return {{"instance_id", f.instance_id},
          {"node_index", f.node_index},
          {"code", f.code},
          {"message", f.message}};
}

nlohmann::json ToJson(const DriftReport& d) {
  return {{"instance_id", d.instance_id},
          {"node_index", d.node_index},
          {"kind", d.kind},
          {"container_id", d.container_id},
          {"exit_code", d.exit_code},
          {"oom_killed", d.oom_killed},
          {"at", d.at},
          {"recreated", d.recreated},
          {"new_container_id", d.new_container_id},
          {"changes", d.changes}};
}

nlohmann::json ToJson(const AgentSyncRequest& r) {
  nlohmann::json j = {{"agent_version", r.agent_version},
                      {"inventory", ToJson(r.inventory)},
                      {"engine", ToJson(r.engine)},
                      {"containers", JsonList(r.containers)},
                      {"failures", JsonList(r.failures)}};
  if (r.observed) j["observed"] = *r.observed;
  if (!r.drift.empty()) j["drift"] = JsonList(r.drift);
  return j;
}

nlohmann::json ToJson(const ClusterSpec& c) {
  return {{"node_index", c.node_index},
          {"rail_addresses", c.rail_addresses},
          {"master_port", c.master_port},
          {"rendezvous_port", c.rendezvous_port},
          {"worker_public_key", c.worker_public_key},
          {"worker_private_key", c.worker_private_key},
          {"node1_host_public_key", c.node1_host_public_key},
          {"host_private_key", c.host_private_key}};
}

nlohmann::json ToJson(const DesiredContainer& d) {
  nlohmann::json j = {{"instance_id", d.instance_id},
                      {"node_index", d.node_index},
                      {"container_name", d.container_name},
                      {"hostname", d.hostname},
                      {"image", d.image},
                      {"memory_bytes", d.memory_bytes},
                      {"gpu", d.gpu},
                      {"authorized_keys", d.authorized_keys},
                      {"restart_generation", d.restart_generation},
                      {"env", d.env}};
  if (d.cluster) j["cluster"] = ToJson(*d.cluster);
  return j;
}

nlohmann::json ToJson(const AgentSyncAnswer& a) {
  nlohmann::json j = {{"host_id", a.host_id},
                      {"sync_interval_seconds", a.sync_interval_seconds},
                      {"desired", JsonList(a.desired)}};
  if (a.desired_version) j["desired_version"] = *a.desired_version;
  return j;
}

nlohmann::json ToJson(const AgentWatchAnswer& a) { return {{"version", a.version}}; }

core::Result<Gpu> GpuFromJson(const nlohmann::json& json, const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  GPUWERK_TRY(r.Only({"name", "uuid", "memory_bytes"}));
  Gpu g;
  GPUWERK_ASSIGN_OR_RETURN(g.name, r.String("name"));
  GPUWERK_ASSIGN_OR_RETURN(g.uuid, r.String("uuid"));
  GPUWERK_ASSIGN_OR_RETURN(g.memory_bytes, r.Uint("memory_bytes"));
  return g;
}

core::Result<Inventory> InventoryFromJson(const nlohmann::json& json, const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  GPUWERK_TRY(r.Only({"gpus", "memory_bytes", "cpus", "addresses", "rail_addresses", "ssh_address",
                      "nvml", "limits"}));
  Inventory inv;
  GPUWERK_ASSIGN_OR_RETURN(inv.gpus, ListOf<Gpu>(r, "gpus", GpuFromJson));
  GPUWERK_ASSIGN_OR_RETURN(inv.memory_bytes, r.Uint("memory_bytes"));
  GPUWERK_ASSIGN_OR_RETURN(inv.cpus, IntField(r, "cpus"));
  GPUWERK_ASSIGN_OR_RETURN(inv.addresses, r.Strings("addresses"));
  GPUWERK_ASSIGN_OR_RETURN(inv.rail_addresses, r.Strings("rail_addresses"));
  GPUWERK_ASSIGN_OR_RETURN(inv.ssh_address, r.String("ssh_address"));
  if (!inv.ssh_address.empty() && !core::IsHostAddress(inv.ssh_address)) {
    return core::Fail(FieldError(r.Path("ssh_address"), "must be an IP address or a DNS name"));
  }
  GPUWERK_ASSIGN_OR_RETURN(inv.nvml, r.String("nvml"));
  if (r.Has("limits")) {
    GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* limits, r.Object("limits"));
    GPUWERK_ASSIGN_OR_RETURN(FieldReader l, FieldReader::Open(*limits, r.Path("limits")));
    GPUWERK_TRY(l.Only({"memory_bytes", "nano_cpus", "pids_limit", "capabilities", "not_enforced",
                        "docker_inside", "shm_bytes"}));
    GPUWERK_ASSIGN_OR_RETURN(inv.limits.memory_bytes, l.Int("memory_bytes"));
    GPUWERK_ASSIGN_OR_RETURN(inv.limits.nano_cpus, l.Int("nano_cpus"));
    GPUWERK_ASSIGN_OR_RETURN(inv.limits.pids_limit, l.Int("pids_limit"));
    GPUWERK_ASSIGN_OR_RETURN(inv.limits.capabilities, l.Strings("capabilities"));
    GPUWERK_ASSIGN_OR_RETURN(inv.limits.not_enforced, l.Strings("not_enforced"));
    if (l.Has("docker_inside")) {
      GPUWERK_ASSIGN_OR_RETURN(inv.limits.docker_inside, l.String("docker_inside"));
      if (inv.limits.docker_inside != "off" && inv.limits.docker_inside != "sysbox" &&
          inv.limits.docker_inside != "privileged") {
        return core::Fail(
            FieldError(l.Path("docker_inside"), "must be \"off\", \"sysbox\" or \"privileged\""));
      }
    }
    if (l.Has("shm_bytes")) {
      GPUWERK_ASSIGN_OR_RETURN(inv.limits.shm_bytes, l.Int("shm_bytes"));
      if (inv.limits.shm_bytes < 0) {
        return core::Fail(FieldError(l.Path("shm_bytes"), "must not be negative"));
      }
    }
  }
  return inv;
}

core::Result<EngineHealth> EngineHealthFromJson(const nlohmann::json& json,
                                                const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  GPUWERK_TRY(r.Only({"ok", "error"}));
  EngineHealth e;
  GPUWERK_ASSIGN_OR_RETURN(e.ok, r.Bool("ok"));
  GPUWERK_ASSIGN_OR_RETURN(e.error, r.String("error"));
  return e;
}

core::Result<ContainerReport> ContainerReportFromJson(const nlohmann::json& json,
                                                      const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  GPUWERK_TRY(r.Only({"instance_id", "node_index", "container_id", "state", "exit_code",
                      "started_at", "finished_at", "ssh_port", "ssh_ready", "restart_generation",
                      "error", "ssh_host_key"}));
  ContainerReport c;
  GPUWERK_ASSIGN_OR_RETURN(c.instance_id, r.String("instance_id"));
  GPUWERK_ASSIGN_OR_RETURN(c.node_index, IntField(r, "node_index"));
  GPUWERK_ASSIGN_OR_RETURN(c.container_id, r.String("container_id"));
  GPUWERK_ASSIGN_OR_RETURN(c.state, r.String("state"));
  GPUWERK_ASSIGN_OR_RETURN(c.exit_code, IntField(r, "exit_code"));
  GPUWERK_ASSIGN_OR_RETURN(c.started_at, r.String("started_at"));
  if (json.contains("finished_at")) {
    GPUWERK_ASSIGN_OR_RETURN(c.finished_at, r.String("finished_at"));
    if (c.finished_at.size() > 64) {
      return core::Fail(FieldError(r.Path("finished_at"), "must be at most 64 characters"));
    }
  }
  GPUWERK_ASSIGN_OR_RETURN(int64_t port, r.IntIn("ssh_port", 0, 65535));
  c.ssh_port = static_cast<uint16_t>(port);
  GPUWERK_ASSIGN_OR_RETURN(c.ssh_ready, r.Bool("ssh_ready"));
  GPUWERK_ASSIGN_OR_RETURN(c.restart_generation, r.Int("restart_generation"));
  GPUWERK_ASSIGN_OR_RETURN(c.error, r.String("error"));
  if (json.contains("ssh_host_key")) {
    GPUWERK_ASSIGN_OR_RETURN(c.ssh_host_key, r.String("ssh_host_key"));
    if (c.ssh_host_key.size() > 512) {
      return core::Fail(FieldError(r.Path("ssh_host_key"), "must be at most 512 characters"));
    }
  }
  return c;
}

core::Result<CreateFailure> CreateFailureFromJson(const nlohmann::json& json,
                                                  const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  GPUWERK_TRY(r.Only({"instance_id", "node_index", "code", "message"}));
  CreateFailure f;
  GPUWERK_ASSIGN_OR_RETURN(f.instance_id, r.String("instance_id"));
  GPUWERK_ASSIGN_OR_RETURN(f.node_index, IntField(r, "node_index"));
  GPUWERK_ASSIGN_OR_RETURN(f.code, r.String("code"));
  GPUWERK_ASSIGN_OR_RETURN(f.message, r.String("message"));
  return f;
}

core::Result<DriftReport> DriftReportFromJson(const nlohmann::json& json, const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  GPUWERK_TRY(r.Only({"instance_id", "node_index", "kind", "container_id", "exit_code",
                      "oom_killed", "at", "recreated", "new_container_id", "changes"}));
  DriftReport d;
  GPUWERK_ASSIGN_OR_RETURN(d.instance_id, NonEmpty(r, "instance_id"));
  GPUWERK_ASSIGN_OR_RETURN(d.node_index, IntField(r, "node_index"));
  GPUWERK_ASSIGN_OR_RETURN(d.kind, r.String("kind"));
  if (std::find(std::begin(kDriftKinds), std::end(kDriftKinds), d.kind) == std::end(kDriftKinds)) {
    return core::Fail(
        FieldError(r.Path("kind"), "must be one of stopped, restarted, paused, removed, changed"));
  }
  GPUWERK_ASSIGN_OR_RETURN(d.container_id, r.String("container_id"));
  GPUWERK_ASSIGN_OR_RETURN(d.exit_code, IntField(r, "exit_code"));
  GPUWERK_ASSIGN_OR_RETURN(d.oom_killed, r.Bool("oom_killed"));
  GPUWERK_ASSIGN_OR_RETURN(d.at, r.String("at"));
  GPUWERK_ASSIGN_OR_RETURN(d.recreated, r.Bool("recreated"));
  GPUWERK_ASSIGN_OR_RETURN(d.new_container_id, r.String("new_container_id"));
  GPUWERK_ASSIGN_OR_RETURN(d.changes, r.Strings("changes"));
  for (size_t i = 0; i < d.changes.size(); ++i) {
    if (std::find(std::begin(kDriftChanges), std::end(kDriftChanges), d.changes[i]) ==
        std::end(kDriftChanges)) {
      return core::Fail(
          FieldError(r.Path("changes", i), "must be one of name, image, memory, cpus, pids"));
    }
  }
  return d;
}

core::Result<AgentSyncRequest> AgentSyncRequestFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_TRY(r.Only(
      {"agent_version", "inventory", "engine", "containers", "failures", "observed", "drift"}));
  AgentSyncRequest req;
  GPUWERK_ASSIGN_OR_RETURN(req.agent_version, r.String("agent_version"));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* inventory, r.Object("inventory"));
  GPUWERK_ASSIGN_OR_RETURN(req.inventory, InventoryFromJson(*inventory, r.Path("inventory")));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* engine, r.Object("engine"));
  GPUWERK_ASSIGN_OR_RETURN(req.engine, EngineHealthFromJson(*engine, r.Path("engine")));
  GPUWERK_ASSIGN_OR_RETURN(req.containers,
                           ListOf<ContainerReport>(r, "containers", ContainerReportFromJson));
  GPUWERK_ASSIGN_OR_RETURN(req.failures,
                           ListOf<CreateFailure>(r, "failures", CreateFailureFromJson));
  if (json.contains("observed")) {
    GPUWERK_ASSIGN_OR_RETURN(req.observed, r.Bool("observed"));
  }
  if (json.contains("drift")) {
    GPUWERK_ASSIGN_OR_RETURN(req.drift, ListOf<DriftReport>(r, "drift", DriftReportFromJson));
  }
  return req;
}

core::Result<ClusterSpec> ClusterSpecFromJson(const nlohmann::json& json, const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  ClusterSpec c;
  GPUWERK_ASSIGN_OR_RETURN(int64_t node, r.IntIn("node_index", 0, 1));
  c.node_index = static_cast<int>(node);
  GPUWERK_ASSIGN_OR_RETURN(c.rail_addresses, r.Strings("rail_addresses"));
  if (c.rail_addresses.size() != 2) {
    return core::Fail(FieldError(r.Path("rail_addresses"), "must hold two addresses"));
  }
  GPUWERK_ASSIGN_OR_RETURN(int64_t master, r.IntIn("master_port", 1, 65535));
  c.master_port = static_cast<int>(master);
  GPUWERK_ASSIGN_OR_RETURN(int64_t rdzv, r.IntIn("rendezvous_port", 1, 65535));
  c.rendezvous_port = static_cast<int>(rdzv);
  GPUWERK_ASSIGN_OR_RETURN(c.worker_public_key, r.String("worker_public_key", 1024));
  GPUWERK_ASSIGN_OR_RETURN(c.worker_private_key, r.String("worker_private_key", 8192));
  GPUWERK_ASSIGN_OR_RETURN(c.node1_host_public_key, r.String("node1_host_public_key", 1024));
  GPUWERK_ASSIGN_OR_RETURN(c.host_private_key, r.String("host_private_key", 8192));
  return c;
}

core::Result<DesiredContainer> DesiredContainerFromJson(const nlohmann::json& json,
                                                        const std::string& path) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, path));
  DesiredContainer d;
  GPUWERK_ASSIGN_OR_RETURN(d.instance_id, NonEmpty(r, "instance_id"));
  GPUWERK_ASSIGN_OR_RETURN(d.node_index, IntField(r, "node_index"));
  GPUWERK_ASSIGN_OR_RETURN(d.container_name, NonEmpty(r, "container_name"));
  GPUWERK_ASSIGN_OR_RETURN(d.hostname, r.String("hostname"));
  GPUWERK_ASSIGN_OR_RETURN(d.image, NonEmpty(r, "image"));
  GPUWERK_ASSIGN_OR_RETURN(d.memory_bytes, r.Int("memory_bytes"));
  GPUWERK_ASSIGN_OR_RETURN(d.gpu, r.Bool("gpu"));
  GPUWERK_ASSIGN_OR_RETURN(d.authorized_keys, r.Strings("authorized_keys"));
  GPUWERK_ASSIGN_OR_RETURN(d.restart_generation, r.Int("restart_generation"));
  GPUWERK_ASSIGN_OR_RETURN(d.env, r.Strings("env"));
  if (json.contains("cluster")) {
    GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* cluster, r.Object("cluster"));
    GPUWERK_ASSIGN_OR_RETURN(d.cluster, ClusterSpecFromJson(*cluster, r.Path("cluster")));
  }
  return d;
}

core::Result<AgentSyncAnswer> AgentSyncAnswerFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  AgentSyncAnswer a;
  GPUWERK_ASSIGN_OR_RETURN(a.host_id, NonEmpty(r, "host_id"));
  GPUWERK_ASSIGN_OR_RETURN(a.sync_interval_seconds, r.Int("sync_interval_seconds"));
  GPUWERK_ASSIGN_OR_RETURN(a.desired,
                           ListOf<DesiredContainer>(r, "desired", DesiredContainerFromJson));
  if (json.contains("desired_version")) {
    GPUWERK_ASSIGN_OR_RETURN(a.desired_version, r.String("desired_version"));
  }
  return a;
}

core::Result<AgentWatchAnswer> AgentWatchAnswerFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  AgentWatchAnswer a;
  GPUWERK_ASSIGN_OR_RETURN(a.version, r.String("version"));
  return a;
}

}  // namespace gpuwerk::protocol
