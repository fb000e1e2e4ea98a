// /api/v1/admin/hosts and /api/v1/admin/host-pairs (operators only) and /api/v1/agent/sync
// (host agents, by host token; docs/agent-protocol.md).
#include <spdlog/spdlog.h>

#include <charconv>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"

namespace gpuwerk::api {
namespace {

nlohmann::json HostJson(const sched::Host& h) {
  nlohmann::json j = {{"id", h.id},
                      {"name", h.name},
                      {"gpu_type", h.gpu_type},
                      {"gpu_required", h.gpu_required},
                      {"drained", h.drained},
                      {"created_at", core::FormatRfc3339(h.created_at)},
                      {"last_seen_at", nullptr},
                      {"inventory", h.inventory},
                      {"engine_error", h.engine_error},
                      {"degraded_reason", h.degraded_reason},
                      {"ssh_address", nullptr},
                      {"ssh_ports", nullptr},
                      {"instance_id", nullptr},
                      {"instance_name", nullptr}};
  if (h.last_seen_at) j["last_seen_at"] = core::FormatRfc3339(*h.last_seen_at);
  if (!h.ssh_address.empty()) {
    j["ssh_address"] = h.ssh_address;
    j["ssh_ports"] = {{"low", h.ssh_port_low}, {"high", h.ssh_port_high}};
  }
  if (!h.instance_id.empty()) {
    j["instance_id"] = h.instance_id;
    j["instance_name"] = h.instance_name;
  }
  j["pair"] = nullptr;
  if (!h.pair_id.empty()) {
    j["pair"] = {{"id", h.pair_id},
                 {"node_index", h.node_index},
                 {"rail_address", h.rail_address},
                 {"partner", h.partner}};
  }
  return j;
}

nlohmann::json PairJson(const sched::HostPair& p) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& m : p.members) {
    hosts.push_back({{"id", m.host_id},
                     {"name", m.host_name},
                     {"node_index", m.node_index},
                     {"rail_address", m.rail_address}});
  }
  nlohmann::json j = {{"id", p.id},
                      {"gpu_type", p.gpu_type},
                      {"hosts", std::move(hosts)},
                      {"instance_id", nullptr},
                      {"created_at", core::FormatRfc3339(p.created_at)}};
  if (!p.instance_id.empty()) j["instance_id"] = p.instance_id;
  return j;
}

/// Capacity of `gpu_type` may have come (a host added or undrained, a pair linked): launch the
/// oldest entries now. A failure is retried by the periodic drain; the change stands.
void DrainType(ApiContext& ctx, const std::string& gpu_type) {
  auto drained = ctx.queue.Drain(gpu_type);
  if (!drained)
    spdlog::warn("sched: queue drain of {} failed: {}", gpu_type, drained.error().message);
}

/// The `hosts` of POST /api/v1/admin/host-pairs: exactly two {name, rail_address}.
core::Result<std::vector<sched::PairNode>> PairNodesFrom(const nlohmann::json& body) {
  auto it = body.find("hosts");
  if (it == body.end() || !it->is_array() || it->size() != 2) {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                  "field 'hosts' must be two {name, rail_address} objects, "
                                  "node 0 first")
                          .WithDetail("field", "hosts"));
  }
  std::vector<sched::PairNode> out;
  for (const auto& h : *it) {
    if (!h.is_object()) {
      return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                    "each of 'hosts' must be an object {name, rail_address}")
                            .WithDetail("field", "hosts"));
    }
    GPUWERK_TRY(RefuseUnknownFields(h, {"name", "rail_address"},
                                    "hosts[" + std::to_string(out.size()) + "]."));
    GPUWERK_ASSIGN_OR_RETURN(std::string name, RequireString(h, "name", 256));
    GPUWERK_ASSIGN_OR_RETURN(std::string rail, RequireString(h, "rail_address", 256));
    out.push_back({std::move(name), std::move(rail)});
  }
  return out;
}

/// The `ssh_address` and `ssh_ports` (`{low, high}`, default kDefaultSshPortLow..High) of a host
/// body: where the relay reaches the host's instances (docs/ssh.md "Upstream address"); nullopt
/// when neither is given and `required` is false. The values are checked by the registry
/// (sched::CheckSshRegistration). Errors: invalid_field (ssh_address not a string; an unknown
/// member of ssh_ports), invalid_ssh_address (missing while required or while ssh_ports is
/// given), invalid_ssh_ports (not an object of two integers).
core::Result<std::optional<sched::SshRegistration>> SshFrom(const nlohmann::json& body,
                                                            bool required) {
  GPUWERK_ASSIGN_OR_RETURN(auto address, OptionalString(body, "ssh_address", 1024));
  const auto ports = body.find("ssh_ports");
  const bool has_ports = ports != body.end() && !ports->is_null();
  if (!address && !has_ports && !required) return std::optional<sched::SshRegistration>();
  if (!address) {
    return core::InvalidArgument("invalid_ssh_address",
                                 "ssh_address is required: the IP address or DNS name the host's "
                                 "agent publishes sshd ports on.");
  }
  sched::SshRegistration ssh{.address = *address};
  if (has_ports) {
    auto bad = [] {
      return core::InvalidArgument(
          "invalid_ssh_ports",
          "ssh_ports must be {\"low\": LOW, \"high\": HIGH}, integers with 1 <= LOW <= HIGH <= "
          "65535.");
    };
    if (!ports->is_object()) return bad();
    GPUWERK_TRY(RefuseUnknownFields(*ports, {"low", "high"}, "ssh_ports."));
    const auto low = ports->find("low");
    const auto high = ports->find("high");
    if (low == ports->end() || high == ports->end() || !low->is_number_integer() ||
        !high->is_number_integer()) {
      return bad();
    }
    // Out-of-range integers (0, 70000, 2^64-1) are the registry's invalid_ssh_ports.
    auto clamp = [](const nlohmann::json& v) -> int64_t {
      if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        return u > 1000000 ? int64_t{1000000} : static_cast<int64_t>(u);
      }
      return v.get<int64_t>();
    };
    ssh.port_low = clamp(*low);
    ssh.port_high = clamp(*high);
  }
  return std::optional<sched::SshRegistration>(std::move(ssh));
}

/// Drains (`drain`) or undrains the host named in the path and answers it.
core::Result<Response> SetDrained(ApiContext& ctx, Call& call, bool drain) {
  const std::string name = call.req.PathParam("name");
  GPUWERK_TRY(ctx.hosts.SetDrained(call.who.person_id, name, drain, call.req.remote_address));
  GPUWERK_ASSIGN_OR_RETURN(auto host, ctx.hosts.Get(name));
  // An undrained host is capacity the queue may be waiting for.
  if (!drain) DrainType(ctx, host.gpu_type);
  return Response::Json(200, HostJson(host));
}

}  // namespace

namespace handlers {

Answer AddHost(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"name", "gpu_type", "gpu_required",
                                                                 "ssh_address", "ssh_ports"}));
  GPUWERK_ASSIGN_OR_RETURN(auto name, RequireString(body, "name", 256, 0));
  GPUWERK_ASSIGN_OR_RETURN(auto type, RequireString(body, "gpu_type", 256));
  bool gpu_required = true;
  if (body.contains("gpu_required") && !body["gpu_required"].is_null()) {
    GPUWERK_ASSIGN_OR_RETURN(gpu_required, RequireBool(body, "gpu_required"));
  }
  GPUWERK_ASSIGN_OR_RETURN(auto ssh, SshFrom(body, /*required=*/false));
  GPUWERK_ASSIGN_OR_RETURN(auto added, ctx.hosts.Add(call.who.person_id, name, type, gpu_required,
                                                     call.req.remote_address, ssh));
  DrainType(ctx, added.host.gpu_type);
  nlohmann::json j = HostJson(added.host);
  j["token"] = added.token;  // shown once
  return Response::Json(201, j);
}

Answer ListHosts(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto hosts, ctx.hosts.List(page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& h : hosts.items) items.push_back(HostJson(h));
  return Response::Json(200, {{"items", std::move(items)},
                              {"page", hosts.page},
                              {"pages", hosts.pages},
                              {"total", hosts.total}});
}

// Where the relay reaches the host's instances (docs/ssh.md "Upstream address"): `{ssh_address,
// ssh_ports?}`, audited `host.set_ssh`; answers the host.
Answer SetHostSsh(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"ssh_address", "ssh_ports"}));
  GPUWERK_ASSIGN_OR_RETURN(auto ssh, SshFrom(body, /*required=*/true));
  GPUWERK_ASSIGN_OR_RETURN(auto host,
                           ctx.hosts.SetSsh(call.who.person_id, call.req.PathParam("name"), *ssh,
                                            call.req.remote_address));
  return Response::Json(200, HostJson(host));
}

// Drain: the host gets no new instances (those on it keep running). Undrain: it takes new ones
// again, and a degraded host is declared fixed (C13).
Answer DrainHost(ApiContext& ctx, Call& call) { return SetDrained(ctx, call, true); }
Answer UndrainHost(ApiContext& ctx, Call& call) { return SetDrained(ctx, call, false); }

// Removes a host: refused (409 host_in_use) while an instance is placed on it; its agent token
// stops working at once and its pair, if any, is unlinked.
Answer RemoveHost(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(
      ctx.hosts.Remove(call.who.person_id, call.req.PathParam("name"), call.req.remote_address));
  return Response::NoContent();
}

Answer LinkHostPair(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonObject(call.req, {"hosts"}));
  GPUWERK_ASSIGN_OR_RETURN(auto nodes, PairNodesFrom(body));
  GPUWERK_ASSIGN_OR_RETURN(auto pair, ctx.hosts.LinkPair(call.who.person_id, nodes[0], nodes[1],
                                                         call.req.remote_address));
  // A new pair is a new slot of its type.
  DrainType(ctx, pair.gpu_type);
  return Response::Json(201, PairJson(pair));
}

Answer ListHostPairs(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto pairs, ctx.hosts.ListPairs(page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& p : pairs.items) items.push_back(PairJson(p));
  return Response::Json(200, {{"items", std::move(items)},
                              {"page", pairs.page},
                              {"pages", pairs.pages},
                              {"total", pairs.total}});
}

Answer UnlinkHostPair(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(
      ctx.hosts.UnlinkPair(call.who.person_id, call.req.PathParam("id"), call.req.remote_address));
  return Response::NoContent();
}

Answer AgentSync(ApiContext& ctx, Call& call) {
  // Read before the desired list is built: a change after this point changes the version, so the
  // agent's next watch returns at once and nothing is missed.
  const uint64_t version = ctx.desired_state.Version(call.host.name);
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonBody(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto answer, ctx.agent_sync.Sync(call.host, body));
  if (ctx.events) ctx.events->Wake();  // statuses may have changed: GET /api/v1/events
  answer["desired_version"] = std::to_string(version);
  return Response::Json(200, answer);
}

// The agent's long poll: answers when the host's desired state differs from `version`, or after
// `wait_seconds` (1–55, default 25) with the version unchanged.
Answer AgentWatch(ApiContext& ctx, Call& call) {
  const auto& query = call.req.query;
  uint64_t known = 0;
  auto v = query.find("version");
  const std::string version = v == query.end() ? std::string() : v->second;
  auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), known);
  if (version.empty() || ec != std::errc() || end != version.data() + version.size()) {
    return core::InvalidArgument("invalid_version",
                                 "version must be the desired_version of a sync answer");
  }
  int wait_seconds = 25;
  if (auto w = query.find("wait_seconds"); w != query.end()) {
    auto [wend, wec] =
        std::from_chars(w->second.data(), w->second.data() + w->second.size(), wait_seconds);
    if (wec != std::errc() || wend != w->second.data() + w->second.size() || wait_seconds < 1 ||
        wait_seconds > 55) {
      return core::InvalidArgument("invalid_wait", "wait_seconds must be from 1 to 55");
    }
  }
  Response r;
  r.deferred = [&ctx, name = call.host.name, known,
                wait_seconds](std::function<void(Response)> respond) {
    ctx.desired_state.Wait(name, known, std::chrono::seconds(wait_seconds),
                           [respond = std::move(respond)](uint64_t now) {
                             respond(Response::Json(200, {{"version", std::to_string(now)}}));
                           });
  };
  return r;
}

}  // namespace handlers
}  // namespace gpuwerk::api
