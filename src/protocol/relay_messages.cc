#include "protocol/relay_messages.h"

#include <limits>

#include "core/strings.h"
#include "protocol/internal/json_fields.h"

namespace gpuwerk::protocol {
namespace {

using internal::FieldError;
using internal::FieldReader;

// Bounds in characters (docs/ssh.md): what a relay sends lands in the store and in the API.
constexpr size_t kMaxAuthorizeField = 16 * 1024;
constexpr size_t kMaxRelayName = 128;
constexpr size_t kMaxId = 256;
constexpr size_t kMaxReportText = 512;
constexpr size_t kMaxTime = 64;
constexpr size_t kMaxEndReason = 1024;

}  // namespace

nlohmann::json ToJson(const RelayAuthorizeRequest& r) {
  return {{"user", r.user},
          {"key_type", r.key_type},
          {"public_key", r.public_key},
          {"fingerprint", r.fingerprint},
          {"source_address", r.source_address}};
}

nlohmann::json ToJson(const RelayAuthorizeDecision& d) {
  if (!d.target) return {{"decision", "refuse"}, {"code", d.code}, {"message", d.message}};
  const RelayTarget& t = *d.target;
  return {{"decision", "allow"},
          {"target",
           {{"instance_id", t.instance_id},
            {"instance_name", t.instance_name},
            {"hostname", t.hostname},
            {"upstream", {{"host", t.upstream_host}, {"port", t.upstream_port}}},
            {"login", t.login},
            {"person_id", t.person_id},
            {"upstream_host_key_fingerprint", t.upstream_host_key_fingerprint}}}};
}

nlohmann::json ToJson(const RelaySessionReport& r) {
  nlohmann::json j = {
      {"person_id", r.person_id},
      {"key_fingerprint", r.key_fingerprint},
      {"instance_id", r.instance_id},
      {"hostname", r.hostname},
      {"login", r.login},
      {"source_address", r.source_address},
      {"started_at", r.started_at},
      {"ended_at", r.ended_at ? nlohmann::json(*r.ended_at) : nlohmann::json(nullptr)},
      {"bytes_from_client", r.bytes_from_client},
      {"bytes_to_client", r.bytes_to_client},
      {"end_reason", r.end_reason}};
  if (!r.relay.empty()) j["relay"] = r.relay;
  return j;
}

nlohmann::json ToJson(const RelayRestarted& r) {
  nlohmann::json j = nlohmann::json::object();
  if (!r.relay.empty()) j["relay"] = r.relay;
  return j;
}

core::Result<RelayAuthorizeRequest> RelayAuthorizeRequestFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_TRY(r.Only({"user", "key_type", "public_key", "fingerprint", "source_address"}));
  RelayAuthorizeRequest req;
  GPUWERK_ASSIGN_OR_RETURN(req.user, r.String("user", kMaxAuthorizeField, 1));
  GPUWERK_ASSIGN_OR_RETURN(req.key_type, r.String("key_type", kMaxAuthorizeField, 1));
  GPUWERK_ASSIGN_OR_RETURN(req.public_key, r.String("public_key", kMaxAuthorizeField, 1));
  GPUWERK_ASSIGN_OR_RETURN(req.fingerprint, r.String("fingerprint", kMaxAuthorizeField, 1));
  GPUWERK_ASSIGN_OR_RETURN(req.source_address, r.String("source_address", kMaxAuthorizeField, 1));
  return req;
}

core::Result<RelayAuthorizeDecision> RelayAuthorizeDecisionFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_ASSIGN_OR_RETURN(std::string decision, r.String("decision"));
  RelayAuthorizeDecision d;
  if (decision == "refuse") {
    GPUWERK_ASSIGN_OR_RETURN(d.code, r.String("code"));
    GPUWERK_ASSIGN_OR_RETURN(d.message, r.String("message"));
    return d;
  }
  if (decision != "allow") {
    return core::Fail(FieldError("decision", "must be \"allow\" or \"refuse\""));
  }
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* target, r.Object("target"));
  GPUWERK_ASSIGN_OR_RETURN(FieldReader t, FieldReader::Open(*target, "target"));
  RelayTarget out;
  GPUWERK_ASSIGN_OR_RETURN(out.instance_id, t.String("instance_id"));
  GPUWERK_ASSIGN_OR_RETURN(out.instance_name, t.String("instance_name"));
  GPUWERK_ASSIGN_OR_RETURN(out.hostname, t.String("hostname"));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* upstream, t.Object("upstream"));
  GPUWERK_ASSIGN_OR_RETURN(FieldReader u, FieldReader::Open(*upstream, "target.upstream"));
  GPUWERK_ASSIGN_OR_RETURN(out.upstream_host, u.String("host"));
  GPUWERK_ASSIGN_OR_RETURN(int64_t port, u.IntIn("port", 0, 65535));
  out.upstream_port = static_cast<uint16_t>(port);
  GPUWERK_ASSIGN_OR_RETURN(out.login, t.String("login"));
  GPUWERK_ASSIGN_OR_RETURN(out.person_id, t.String("person_id"));
  GPUWERK_ASSIGN_OR_RETURN(out.upstream_host_key_fingerprint,
                           t.String("upstream_host_key_fingerprint"));
  d.target = std::move(out);
  return d;
}

core::Result<RelaySessionReport> RelaySessionReportFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_TRY(r.Only({"relay", "person_id", "key_fingerprint", "instance_id", "hostname", "login",
                      "source_address", "started_at", "ended_at", "bytes_from_client",
                      "bytes_to_client", "end_reason"}));
  RelaySessionReport rep;
  if (r.Has("relay")) {
    GPUWERK_ASSIGN_OR_RETURN(rep.relay, r.String("relay", kMaxRelayName, 1));
  }
  GPUWERK_ASSIGN_OR_RETURN(rep.person_id, r.String("person_id", kMaxId, 1));
  GPUWERK_ASSIGN_OR_RETURN(rep.key_fingerprint, r.String("key_fingerprint", kMaxReportText));
  GPUWERK_ASSIGN_OR_RETURN(rep.instance_id, r.String("instance_id", kMaxId, 1));
  GPUWERK_ASSIGN_OR_RETURN(rep.hostname, r.String("hostname", kMaxReportText));
  GPUWERK_ASSIGN_OR_RETURN(rep.login, r.String("login", kMaxReportText));
  GPUWERK_ASSIGN_OR_RETURN(rep.source_address, r.String("source_address", kMaxReportText));
  GPUWERK_ASSIGN_OR_RETURN(rep.started_at, r.String("started_at", kMaxTime, 1));
  if (r.Has("ended_at")) {
    GPUWERK_ASSIGN_OR_RETURN(rep.ended_at, r.String("ended_at", kMaxTime, 1));
  }
  constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
  GPUWERK_ASSIGN_OR_RETURN(rep.bytes_from_client, r.IntIn("bytes_from_client", 0, kMaxBytes));
  GPUWERK_ASSIGN_OR_RETURN(rep.bytes_to_client, r.IntIn("bytes_to_client", 0, kMaxBytes));
  if (r.Has("end_reason")) {
    GPUWERK_ASSIGN_OR_RETURN(rep.end_reason, r.String("end_reason", kMaxEndReason));
  }
  return rep;
}

core::Result<RelayRestarted> RelayRestartedFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_TRY(r.Only({"relay"}));
  RelayRestarted out;
  if (r.Has("relay")) {
    GPUWERK_ASSIGN_OR_RETURN(out.relay, r.String("relay", kMaxRelayName, 1));
  }
  return out;
}

nlohmann::json ToJson(const RelayRefusalReport& r) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& g : r.refusals) {
    items.push_back({{"code", g.code},
                     {"user", g.user},
                     {"key_fingerprint", g.key_fingerprint},
                     {"person_id", g.person_id},
                     {"instance_id", g.instance_id},
                     {"source_address", g.source_address},
                     {"expected_host_key", g.expected_host_key},
                     {"presented_host_key", g.presented_host_key},
                     {"count", g.count},
                     {"first_at", g.first_at},
                     {"last_at", g.last_at}});
  }
  return {{"refusals", std::move(items)}, {"dropped", r.dropped}};
}

core::Result<RelayRefusalReport> RelayRefusalReportFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_TRY(r.Only({"refusals", "dropped"}));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* items, r.Array("refusals"));
  if (items->size() > kMaxRefusalGroups) {
    return core::Fail(FieldError(
        "refusals", "must have at most " + std::to_string(kMaxRefusalGroups) + " items"));
  }
  RelayRefusalReport out;
  GPUWERK_ASSIGN_OR_RETURN(out.dropped, r.IntIn("dropped", 0, int64_t{1} << 53));
  for (size_t i = 0; i < items->size(); ++i) {
    GPUWERK_ASSIGN_OR_RETURN(FieldReader item,
                             FieldReader::Open((*items)[i], r.Path("refusals", i)));
    GPUWERK_TRY(
        item.Only({"code", "user", "key_fingerprint", "person_id", "instance_id", "source_address",
                   "expected_host_key", "presented_host_key", "count", "first_at", "last_at"}));
    RelayRefusalGroup g;
    GPUWERK_ASSIGN_OR_RETURN(g.code, item.String("code", 64, 1));
    GPUWERK_ASSIGN_OR_RETURN(g.user, item.String("user", kMaxReportText));
    // Escaped once, by the relay (docs/ssh.md "Outside text"): the server keeps it as it is, so
    // it must already be in that form.
    if (!core::IsBoundedPrintable(g.user)) {
      return core::Fail(FieldError(item.Path("user"),
                                   "must be the SSH user name in its bounded printable form "
                                   "(escaped and bounded by the relay)"));
    }
    GPUWERK_ASSIGN_OR_RETURN(g.key_fingerprint, item.String("key_fingerprint", kMaxReportText));
    GPUWERK_ASSIGN_OR_RETURN(g.person_id, item.String("person_id", kMaxId));
    GPUWERK_ASSIGN_OR_RETURN(g.instance_id, item.String("instance_id", kMaxId));
    GPUWERK_ASSIGN_OR_RETURN(g.source_address, item.String("source_address", kMaxReportText));
    GPUWERK_ASSIGN_OR_RETURN(g.expected_host_key, item.String("expected_host_key", kMaxReportText));
    GPUWERK_ASSIGN_OR_RETURN(g.presented_host_key,
                             item.String("presented_host_key", kMaxReportText));
    GPUWERK_ASSIGN_OR_RETURN(g.count, item.IntIn("count", 1, 1'000'000));
    GPUWERK_ASSIGN_OR_RETURN(g.first_at, item.String("first_at", kMaxTime, 1));
    GPUWERK_ASSIGN_OR_RETURN(g.last_at, item.String("last_at", kMaxTime, 1));
    out.refusals.push_back(std::move(g));
  }
  return out;
}

nlohmann::json ToJson(const RelayRecheckRequest& r) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& i : r.relay_sessions) {
    items.push_back({{"id", i.id},
                     {"instance_id", i.instance_id},
                     {"login", i.login},
                     {"request", ToJson(i.request)}});
  }
  return {{"relay_sessions", std::move(items)}};
}

nlohmann::json ToJson(const std::vector<RelayRecheckResult>& results) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json item = {{"id", r.id}, {"allowed", r.allowed}};
    if (!r.allowed) item["message"] = r.message;
    items.push_back(std::move(item));
  }
  return {{"results", std::move(items)}};
}

nlohmann::json ToJson(const RelayAccessChange& c) {
  return {{"instance_ids", c.instance_ids},
          {"person_ids", c.person_ids},
          {"key_fingerprints", c.key_fingerprints},
          {"reason", c.reason}};
}

core::Result<RelayRecheckRequest> RelayRecheckRequestFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_TRY(r.Only({"relay_sessions"}));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* items, r.Array("relay_sessions"));
  if (items->size() > kMaxRecheckBatch) {
    return core::Fail(FieldError(
        "relay_sessions",
        "must have at most " + std::to_string(kMaxRecheckBatch) + " items; send several batches"));
  }
  RelayRecheckRequest out;
  for (size_t i = 0; i < items->size(); ++i) {
    GPUWERK_ASSIGN_OR_RETURN(FieldReader item,
                             FieldReader::Open((*items)[i], r.Path("relay_sessions", i)));
    GPUWERK_TRY(item.Only({"id", "instance_id", "login", "request"}));
    RelayRecheckItem one;
    GPUWERK_ASSIGN_OR_RETURN(one.id, item.String("id", kMaxId, 1));
    GPUWERK_ASSIGN_OR_RETURN(one.instance_id, item.String("instance_id", kMaxId, 1));
    GPUWERK_ASSIGN_OR_RETURN(one.login, item.String("login", kMaxReportText, 1));
    GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* request, item.Object("request"));
    GPUWERK_ASSIGN_OR_RETURN(one.request, RelayAuthorizeRequestFromJson(*request));
    out.relay_sessions.push_back(std::move(one));
  }
  return out;
}

core::Result<std::vector<RelayRecheckResult>> RelayRecheckResultsFromJson(
    const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* items, r.Array("results"));
  std::vector<RelayRecheckResult> out;
  for (size_t i = 0; i < items->size(); ++i) {
    GPUWERK_ASSIGN_OR_RETURN(FieldReader item,
                             FieldReader::Open((*items)[i], r.Path("results", i)));
    RelayRecheckResult one;
    GPUWERK_ASSIGN_OR_RETURN(one.id, item.String("id"));
    GPUWERK_ASSIGN_OR_RETURN(one.allowed, item.Bool("allowed"));
    if (!one.allowed && item.Has("message")) {
      GPUWERK_ASSIGN_OR_RETURN(one.message, item.String("message"));
    }
    out.push_back(std::move(one));
  }
  return out;
}

core::Result<RelayAccessChange> RelayAccessChangeFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(FieldReader r, FieldReader::Open(json, ""));
  RelayAccessChange c;
  GPUWERK_ASSIGN_OR_RETURN(c.instance_ids, r.Strings("instance_ids"));
  GPUWERK_ASSIGN_OR_RETURN(c.person_ids, r.Strings("person_ids"));
  GPUWERK_ASSIGN_OR_RETURN(c.key_fingerprints, r.Strings("key_fingerprints"));
  GPUWERK_ASSIGN_OR_RETURN(c.reason, r.String("reason"));
  for (const auto* list : {&c.instance_ids, &c.person_ids, &c.key_fingerprints}) {
    if (list->size() > kMaxRecheckBatch) {
      return core::Fail(
          FieldError("", "lists at most " + std::to_string(kMaxRecheckBatch) + " items each"));
    }
  }
  return c;
}

}  // namespace gpuwerk::protocol
