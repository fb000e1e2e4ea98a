// /api/v1/relay/…: what a remote relay asks and reports (docs/ssh.md).
#include <arpa/inet.h>

#include <cctype>
#include <limits>

#include "api/handler_support.h"
#include "api/relay_routes.h"
#include "api/router.h"
#include "relay/http_relay_authorizer.h"
#include "sched/instance_table.h"
#include "store/relay_session_records.h"

namespace gpuwerk::api {
namespace {

/// Authenticates a relay: a person who must be an operator.
template <class Fn>
Response AsRelay(ApiContext& ctx, Request& req, Fn&& fn) {
  return Authenticated(ctx, req, [&](const auth::Principal& who) {
    if (!who.is_operator) {
      return ErrorResponse(core::Error(core::ErrorCode::kPermissionDenied, "forbidden",
                                       "Only a relay (an operator's API token) may do this."));
    }
    return fn(who);
  });
}

core::Error InvalidField(const std::string& field, const std::string& message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_field", message)
      .WithDetail("field", field);
}

/// The `relay` field: 1–128 characters, not "local" (gpuwerk up's own relay).
core::Result<std::string> RelayName(const nlohmann::json& body) {
  GPUWERK_ASSIGN_OR_RETURN(std::string relay, RequireString(body, "relay", 128));
  if (relay == "local") {
    return core::Fail(
        InvalidField("relay",
                     "The relay name 'local' belongs to gpuwerk up's own relay; start this relay "
                     "with another --name."));
  }
  return relay;
}

/// An RFC 3339 UTC time field as Unix seconds.
core::Result<int64_t> TimeField(const nlohmann::json& body, const std::string& field) {
  GPUWERK_ASSIGN_OR_RETURN(std::string text, RequireString(body, field, 64));
  auto t = core::ParseRfc3339(text);
  if (!t) {
    return core::Fail(
        InvalidField(field, field + " must be an RFC 3339 UTC time like 2026-01-02T03:04:05Z."));
  }
  return *t;
}

/// A relay session id from the path: 1–128 of [A-Za-z0-9_-] ("rls_…" from gpuwerk relays).
bool ValidSessionId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

/// Whether `text` is an IPv4 or IPv6 address literal (what the relay reports as the client's).
bool IsIpLiteral(const std::string& text) {
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

/// How far in the future a relay's clock may put a time it reports, in seconds.
constexpr int64_t kClockSkewSeconds = 300;

core::Result<store::RelaySessionRow> ParseReport(const std::string& id, const nlohmann::json& body,
                                                 int64_t now) {
  store::RelaySessionRow row;
  if (!ValidSessionId(id)) {
    return core::InvalidArgument("invalid_relay_session",
                                 "A relay session id is 1 to 128 letters, digits, '_' or '-'.");
  }
  row.id = id;
  GPUWERK_ASSIGN_OR_RETURN(row.relay, RelayName(body));
  GPUWERK_ASSIGN_OR_RETURN(row.person_id, RequireString(body, "person_id", 256));
  GPUWERK_ASSIGN_OR_RETURN(row.instance_id, RequireString(body, "instance_id", 256));
  for (auto [field, out] : {std::pair{"key_fingerprint", &row.key_fingerprint},
                            {"hostname", &row.hostname},
                            {"login", &row.login},
                            {"source_address", &row.source_address}}) {
    GPUWERK_ASSIGN_OR_RETURN(*out, RequireString(body, field, 512, 0));
  }
  if (!IsIpLiteral(row.source_address)) {
    return core::Fail(
        InvalidField("source_address", "source_address must be an IPv4 or IPv6 address."));
  }
  GPUWERK_ASSIGN_OR_RETURN(row.started_at, TimeField(body, "started_at"));
  if (row.started_at > now + kClockSkewSeconds) {
    return core::Fail(InvalidField("started_at", "started_at is in the future."));
  }
  if (body.contains("ended_at") && !body["ended_at"].is_null()) {
    GPUWERK_ASSIGN_OR_RETURN(row.ended_at, TimeField(body, "ended_at"));
    if (*row.ended_at < row.started_at) {
      return core::Fail(InvalidField("ended_at", "ended_at is before started_at."));
    }
    if (*row.ended_at > now + kClockSkewSeconds) {
      return core::Fail(InvalidField("ended_at", "ended_at is in the future."));
    }
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  GPUWERK_ASSIGN_OR_RETURN(row.bytes_from_client, RequireInt(body, "bytes_from_client", 0, kMax));
  GPUWERK_ASSIGN_OR_RETURN(row.bytes_to_client, RequireInt(body, "bytes_to_client", 0, kMax));
  GPUWERK_ASSIGN_OR_RETURN(auto reason, OptionalString(body, "end_reason", 1024));
  row.end_reason = reason.value_or("");
  return row;
}

}  // namespace

void RegisterRelayRoutes(Router& router, ApiContext& ctx, relay::RelayAuthorizer& authorizer,
                         store::Database& db, core::Rng& rng) {
  router.Add("POST", "/api/v1/relay/authorize", [&ctx, &authorizer](Request& req) {
    return AsRelay(ctx, req, [&](const auth::Principal&) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        relay::AuthorizeRequest r;
        for (auto [field, out] : {std::pair{"user", &r.user},
                                  {"key_type", &r.key_type},
                                  {"public_key", &r.key_blob_base64},
                                  {"fingerprint", &r.key_fingerprint},
                                  {"source_address", &r.source_address}}) {
          auto value = RequireString(body, field, 16 * 1024);
          if (!value) return ErrorResponse(value.error());
          *out = *value;
        }
        auto decision = authorizer.Authorize(r);
        if (!decision) return ErrorResponse(decision.error());
        return Response::Json(200, relay::AuthorizeDecisionJson(*decision));
      });
    });
  });

  router.Add("PUT", "/api/v1/relay/sessions/{id}", [&ctx, &db, &rng](Request& req) {
    return AsRelay(ctx, req, [&](const auth::Principal&) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto row = ParseReport(req.PathParam("id"), body, ctx.clock.NowUnix());
        if (!row) return ErrorResponse(row.error());
        auto recorded = db.Write([&](store::Transaction& tx) -> core::Result<bool> {
          // The person must be the instance's owner: a report cannot file a relay session
          // under someone else's instance (it would show in their list).
          GPUWERK_ASSIGN_OR_RETURN(
              auto owned, sched::InstanceTable::FindOwned(tx, row->person_id, row->instance_id));
          if (!owned) {
            return core::Fail(InvalidField(
                "instance_id", "instance_id is not an instance of person_id on this server."));
          }
          return row->ended_at ? store::RecordRelaySessionEnd(tx, ctx.clock, rng, *row)
                               : store::RecordRelaySessionStart(tx, ctx.clock, rng, *row);
        });
        if (!recorded) return ErrorResponse(recorded.error());
        return Response::Json(200, {{"id", row->id}, {"recorded", *recorded}});
      });
    });
  });

  router.Add("POST", "/api/v1/relay/restarted", [&ctx, &db, &rng](Request& req) {
    return AsRelay(ctx, req, [&](const auth::Principal&) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto relay = RelayName(body);
        if (!relay) return ErrorResponse(relay.error());
        auto closed = db.Write([&](store::Transaction& tx) {
          return store::CloseOpenRelaySessions(tx, ctx.clock, rng, *relay, ctx.clock.NowUnix());
        });
        if (!closed) return ErrorResponse(closed.error());
        return Response::Json(200, {{"relay", *relay}, {"closed", *closed}});
      });
    });
  });

  RegisterRelaySessionRoutes(router, ctx, db);
}

}  // namespace gpuwerk::api
