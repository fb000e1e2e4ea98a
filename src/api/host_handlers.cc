// /api/v1/admin/hosts and /api/v1/admin/host-pairs (operators only) and /api/v1/agent/sync
// (host agents, by host token; docs/agent-protocol.md).
#include <spdlog/spdlog.h>

#include <charconv>

#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/router.h"

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
                      {"instance_id", nullptr}};
  if (h.last_seen_at) j["last_seen_at"] = core::FormatRfc3339(*h.last_seen_at);
  if (!h.instance_id.empty()) j["instance_id"] = h.instance_id;
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
    GPUWERK_ASSIGN_OR_RETURN(std::string name, RequireString(h, "name", 256));
    GPUWERK_ASSIGN_OR_RETURN(std::string rail, RequireString(h, "rail_address", 256));
    out.push_back({std::move(name), std::move(rail)});
  }
  return out;
}

/// The host whose token the request carries as `Authorization: Bearer gwh_…`.
core::Result<sched::Host> AuthenticateAgent(ApiContext& ctx, const Request& req) {
  std::string_view auth = req.Header("Authorization");
  std::string token;
  if (auth.size() > 7 && EqualsIgnoreCase(auth.substr(0, 7), "bearer ")) {
    token = std::string(auth.substr(7));
  }
  return ctx.hosts.AuthenticateAgent(token);
}

/// Authenticates a person who must be an operator.
template <class Fn>
Response AsOperator(ApiContext& ctx, Request& req, Fn&& fn) {
  return Authenticated(ctx, req, [&](const auth::Principal& who) {
    if (!who.is_operator) {
      return ErrorResponse(core::Error(core::ErrorCode::kPermissionDenied, "forbidden",
                                       "Only operators may do this."));
    }
    return fn(who);
  });
}

}  // namespace

void RegisterHostRoutes(Router& router, ApiContext& ctx) {
  router.Add("POST", "/api/v1/admin/hosts", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal& who) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto name = RequireString(body, "name", 256, 0);
        if (!name) return ErrorResponse(name.error());
        auto type = RequireString(body, "gpu_type", 256);
        if (!type) return ErrorResponse(type.error());
        bool gpu_required = true;
        if (body.contains("gpu_required") && !body["gpu_required"].is_null()) {
          auto g = RequireBool(body, "gpu_required");
          if (!g) return ErrorResponse(g.error());
          gpu_required = *g;
        }
        auto added = ctx.hosts.Add(who.person_id, *name, *type, gpu_required, req.remote_address);
        if (!added) return ErrorResponse(added.error());
        DrainType(ctx, added->host.gpu_type);
        nlohmann::json j = HostJson(added->host);
        j["token"] = added->token;  // shown once
        return Response::Json(201, j);
      });
    });
  });

  // Drain: the host gets no new instances (those on it keep running). Undrain: it takes new ones
  // again, and a degraded host is declared fixed (C13).
  for (const bool drain : {true, false}) {
    router.Add("POST",
               drain ? "/api/v1/admin/hosts/{name}/drain" : "/api/v1/admin/hosts/{name}/undrain",
               [&ctx, drain](Request& req) {
                 return AsOperator(ctx, req, [&](const auth::Principal& who) {
                   const std::string& name = req.path_params["name"];
                   auto done = ctx.hosts.SetDrained(who.person_id, name, drain, req.remote_address);
                   if (!done) return ErrorResponse(done.error());
                   auto hosts = ctx.hosts.List();
                   if (!hosts) return ErrorResponse(hosts.error());
                   for (const auto& h : *hosts) {
                     if (h.name != name) continue;
                     // An undrained host is capacity the queue may be waiting for.
                     if (!drain) DrainType(ctx, h.gpu_type);
                     return Response::Json(200, HostJson(h));
                   }
                   return ErrorResponse(core::NotFound("Host").error());
                 });
               });
  }

  // Removes a host: refused (409 host_in_use) while an instance is placed on it; its agent
  // token stops working at once and its pair, if any, is unlinked.
  router.Add("DELETE", "/api/v1/admin/hosts/{name}", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal& who) {
      auto removed = ctx.hosts.Remove(who.person_id, req.path_params["name"], req.remote_address);
      if (!removed) return ErrorResponse(removed.error());
      return Response::NoContent();
    });
  });

  router.Add("POST", "/api/v1/admin/host-pairs", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal& who) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto nodes = PairNodesFrom(body);
        if (!nodes) return ErrorResponse(nodes.error());
        auto pair = ctx.hosts.LinkPair(who.person_id, (*nodes)[0], (*nodes)[1], req.remote_address);
        if (!pair) return ErrorResponse(pair.error());
        // A new pair is a new slot of its type.
        DrainType(ctx, pair->gpu_type);
        return Response::Json(201, PairJson(*pair));
      });
    });
  });

  router.Add("GET", "/api/v1/admin/host-pairs", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal&) {
      auto page = PageParam(req);
      if (!page) return ErrorResponse(page.error());
      auto pairs = ctx.hosts.ListPairs(*page);
      if (!pairs) return ErrorResponse(pairs.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& p : pairs->items) items.push_back(PairJson(p));
      return Response::Json(200, {{"items", std::move(items)},
                                  {"page", pairs->page},
                                  {"pages", pairs->pages},
                                  {"total", pairs->total}});
    });
  });

  router.Add("DELETE", "/api/v1/admin/host-pairs/{id}", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal& who) {
      auto unlinked =
          ctx.hosts.UnlinkPair(who.person_id, req.path_params["id"], req.remote_address);
      if (!unlinked) return ErrorResponse(unlinked.error());
      return Response::NoContent();
    });
  });

  router.Add("GET", "/api/v1/admin/hosts", [&ctx](Request& req) {
    return AsOperator(ctx, req, [&](const auth::Principal&) {
      auto hosts = ctx.hosts.List();
      if (!hosts) return ErrorResponse(hosts.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& h : *hosts) items.push_back(HostJson(h));
      return Response::Json(200, {{"items", items}});
    });
  });

  router.Add("POST", "/api/v1/agent/sync", [&ctx](Request& req) {
    auto host = AuthenticateAgent(ctx, req);
    if (!host) return ErrorResponse(host.error());
    // Read before the desired list is built: a change after this point changes the version, so
    // the agent's next watch returns at once and nothing is missed.
    const uint64_t version = ctx.desired_state.Version(host->name);
    return WithJsonBody(req, [&](const nlohmann::json& body) {
      auto answer = ctx.agent_sync.Sync(*host, body);
      if (!answer) return ErrorResponse(answer.error());
      if (ctx.events) ctx.events->Wake();  // statuses may have changed: GET /api/v1/events
      (*answer)["desired_version"] = std::to_string(version);
      return Response::Json(200, *answer);
    });
  });

  // The agent's long poll: answers when the host's desired state differs from `version`, or
  // after `wait_seconds` (1–55, default 25) with the version unchanged.
  router.Add("GET", "/api/v1/agent/watch", [&ctx](Request& req) {
    auto host = AuthenticateAgent(ctx, req);
    if (!host) return ErrorResponse(host.error());
    uint64_t known = 0;
    const std::string& version = req.query["version"];
    auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), known);
    if (version.empty() || ec != std::errc() || end != version.data() + version.size()) {
      return ErrorResponse(core::Error(core::ErrorCode::kInvalidArgument, "invalid_version",
                                       "version must be the desired_version of a sync answer"));
    }
    int wait_seconds = 25;
    if (auto w = req.query.find("wait_seconds"); w != req.query.end()) {
      auto [wend, wec] =
          std::from_chars(w->second.data(), w->second.data() + w->second.size(), wait_seconds);
      if (wec != std::errc() || wend != w->second.data() + w->second.size() || wait_seconds < 1 ||
          wait_seconds > 55) {
        return ErrorResponse(core::Error(core::ErrorCode::kInvalidArgument, "invalid_wait",
                                         "wait_seconds must be from 1 to 55"));
      }
    }
    Response r;
    r.deferred = [&ctx, name = host->name, known,
                  wait_seconds](std::function<void(Response)> respond) {
      ctx.desired_state.Wait(name, known, std::chrono::seconds(wait_seconds),
                             [respond = std::move(respond)](uint64_t now) {
                               respond(Response::Json(200, {{"version", std::to_string(now)}}));
                             });
    };
    return r;
  });
}

}  // namespace gpuwerk::api
