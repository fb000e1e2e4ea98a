#include "relay/http_relay_authorizer.h"

#include "core/curl_handles.h"
#include "relay/internal/http_call.h"

namespace gpuwerk::relay {
namespace {

core::Error BadAnswer(const std::string& why) {
  return core::Error(core::ErrorCode::kUnavailable, "bad_authorize_response",
                     "the server's authorize answer is not understood: " + why);
}

}  // namespace

nlohmann::json AuthorizeRequestJson(const AuthorizeRequest& r) {
  return {{"user", r.user},
          {"key_type", r.key_type},
          {"public_key", r.key_blob_base64},
          {"fingerprint", r.key_fingerprint},
          {"source_address", r.source_address}};
}

nlohmann::json AuthorizeDecisionJson(const AuthorizeDecision& d) {
  if (!d.target) {
    return {{"decision", "refuse"}, {"code", "not_authorized"}, {"message", d.refusal}};
  }
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

core::Result<AuthorizeDecision> ParseAuthorizeDecision(const nlohmann::json& body) {
  if (!body.is_object() || !body.contains("decision") || !body["decision"].is_string()) {
    return core::Fail(BadAnswer("no decision"));
  }
  const std::string decision = body["decision"];
  if (decision == "refuse") {
    auto m = body.find("message");
    return AuthorizeDecision::Refuse(m != body.end() && m->is_string() ? m->get<std::string>()
                                                                       : "gpuwerk: access refused");
  }
  if (decision != "allow") return core::Fail(BadAnswer("decision '" + decision + "'"));
  auto t = body.find("target");
  if (t == body.end() || !t->is_object()) return core::Fail(BadAnswer("no target"));
  auto str = [&](const nlohmann::json& o, const char* k) -> core::Result<std::string> {
    auto it = o.find(k);
    if (it == o.end() || !it->is_string()) {
      return core::Fail(BadAnswer(std::string("target without ") + k));
    }
    return it->get<std::string>();
  };
  RelayTarget target;
  GPUWERK_ASSIGN_OR_RETURN(target.instance_id, str(*t, "instance_id"));
  GPUWERK_ASSIGN_OR_RETURN(target.instance_name, str(*t, "instance_name"));
  GPUWERK_ASSIGN_OR_RETURN(target.hostname, str(*t, "hostname"));
  GPUWERK_ASSIGN_OR_RETURN(target.login, str(*t, "login"));
  GPUWERK_ASSIGN_OR_RETURN(target.person_id, str(*t, "person_id"));
  auto up = t->find("upstream");
  if (up == t->end() || !up->is_object()) return core::Fail(BadAnswer("target without upstream"));
  GPUWERK_ASSIGN_OR_RETURN(target.upstream_host, str(*up, "host"));
  auto port = up->find("port");
  if (port == up->end() || !port->is_number_integer() || port->get<int64_t>() < 0 ||
      port->get<int64_t>() > 65535) {
    return core::Fail(BadAnswer("upstream without a port"));
  }
  target.upstream_port = static_cast<uint16_t>(port->get<int64_t>());
  if (auto fp = t->find("upstream_host_key_fingerprint"); fp != t->end() && fp->is_string()) {
    target.upstream_host_key_fingerprint = fp->get<std::string>();
  }
  return AuthorizeDecision::Allow(std::move(target));
}

HttpRelayAuthorizer::HttpRelayAuthorizer(std::string server_url, std::string token,
                                         std::chrono::milliseconds timeout)
    : url_(std::move(server_url)), token_(std::move(token)), timeout_(timeout) {
  while (!url_.empty() && url_.back() == '/') url_.pop_back();
  url_ += kPath;
  core::CurlGlobalInitOnce();
}

core::Result<AuthorizeDecision> HttpRelayAuthorizer::Authorize(const AuthorizeRequest& request) {
  GPUWERK_ASSIGN_OR_RETURN(
      internal::HttpAnswer answer,
      internal::CallJson("POST", url_, token_, AuthorizeRequestJson(request).dump(), timeout_));
  const long status = answer.status;
  if (status == 401 || status == 403) {
    return core::Fail(core::ErrorCode::kUnauthenticated, "relay_token_refused",
                      "the server at " + url_ + " refused the relay's token (" +
                          std::to_string(status) + "); it must be an operator's API token");
  }
  if (status != 200) {
    return core::Fail(core::ErrorCode::kUnavailable, "server_error",
                      "the server at " + url_ + " answered " + std::to_string(status));
  }
  return ParseAuthorizeDecision(nlohmann::json::parse(answer.body, nullptr, false));
}

}  // namespace gpuwerk::relay
