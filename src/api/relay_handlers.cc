// The routes of the SSH relay (docs/ssh.md, docs/api.md "Relay sessions"):
//
// For `gpuwerk relay`s, authenticated by their relay credential (Access::kRelay: `Bearer gwr_…`;
// anything else gets 401/403). The credential names the relay: the `relay` of every row it files
// is that name (a `relay` field naming another is refused, 403 `relay_name_mismatch`).
// - `POST /api/v1/relay/authorize`: whether a login may pass and where it goes. Body: {user,
//   key_type, public_key, fingerprint, source_address}, each a string; answer 200
//   {"decision":"allow","target":…} or {"decision":"refuse","code","message"} from
//   access::RelayAccess (so a remote relay decides exactly as `gpuwerk up`'s in-process one).
// - `PUT /api/v1/relay/sessions/{id}`: a relay session's start (ended_at null) or end
//   (protocol::RelaySessionReport), recorded idempotently (access::RecordRelaySessionStart /
//   End); 200 {id, recorded} where `recorded` says whether this report changed anything. Its
//   free text (key_fingerprint, hostname, login, end_reason) is kept in its bounded printable
//   form (core::BoundedPrintable).
//   Errors: 400 `invalid_field`, `invalid_relay_session`; 403 `relay_name_mismatch`; 409
//   `relay_session_conflict` (the id belongs to another relay).
// - `POST /api/v1/relay/restarted` {} or {relay}: the relay started; its rows still open are
//   closed with "relay restarted" (access::CloseOpenRelaySessions); 200 {relay, closed}, where
//   `relay` is the credential's name. Errors: 403 `relay_name_mismatch`.
// - `POST /api/v1/relay/refusals` {refusals: [RelayRefusalGroup…], dropped}: the logins the
//   relay refused in about a minute, grouped (protocol::RelayRefusalReport, at most
//   protocol::kMaxRefusalGroups groups); each group becomes one `relay_session.refused` audit
//   event with its count (and a host key mismatch one `relay.host_key_mismatch`), `dropped` one
//   `relay_session.refusals_dropped` (access::RecordRelayRefusal). A group's person_id and
//   instance_id become the events' actor and target only when the store has that instance as
//   that person's (else they are details `claimed_person_id`, `claimed_instance_id`); its text is
//   stored bounded and escaped, `user` as the relay escaped it. At most
//   kRefusalReportsPerMinute reports per relay a minute (auth::RateLimiter), so a relay cannot
//   write more than about 1,000 audit events a minute; 200 {recorded}. Errors: 400
//   `invalid_field` (a source_address that is not an IP literal, a `user` not in the relay's
//   bounded printable form, too); 429 `rate_limited`.
//
// - `POST /api/v1/relay/recheck` {relay_sessions: [{id, instance_id, login, request}]} (at most
//   protocol::kMaxRecheckBatch): the backstop re-check of a relay's open relay sessions in one
//   batch (docs/ssh.md "Revocation"); 200 {results: [{id, allowed[, message]}]} in the order
//   asked, each from access::RelayAccess as at login: allowed when the same request still goes
//   to the same instance as the same login. Errors: 400 `invalid_field`.
// - `GET /api/v1/relay/watch`: server-sent events of access changes (api::RelayWatchHub); the
//   stream ends once the relay's credential no longer admits it (revoked: at once, through
//   RelayWatchHub::CheckNow). Errors: 503 `too_many_streams`.
//
// Lists (relay_session_handlers.cc), 15 a page, newest first:
// - `GET /api/v1/instances/{id}/relay-sessions?page=N`: the instance's owner (id, or live
//   name; a deleted instance's history stays listed by id); 404 `not_found` for anyone else.
// - `GET /api/v1/admin/relay-sessions?page=N[&instance_id=…][&person_id=…]`: operators (403
//   `forbidden` otherwise); items also carry the person's `email`.
//
// The relay name "local" belongs to `gpuwerk up`'s own relay: only its credential
// (access::RelayCredentials::IssueLocal) names it. Errors everywhere: 503 when the store fails.
#include <arpa/inet.h>

#include <cctype>
#include <limits>

#include "access/relay_refusals.h"
#include "access/relay_session_records.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "api/relay_watch_hub.h"
#include "auth/rate_limiter.h"
#include "core/strings.h"
#include "protocol/relay_messages.h"
#include "sched/instance_table.h"

namespace gpuwerk::api {
namespace {

core::Error InvalidField(const std::string& field, const std::string& message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_field", message)
      .WithDetail("field", field);
}

/// The name the calling relay files rows under: its credential's. A `relay` field (`claimed`,
/// "" when absent) must be that name: a relay cannot report as another. Errors: 403
/// relay_name_mismatch (details: relay, the credential's name).
core::Result<std::string> RelayName(const Call& call, const std::string& claimed) {
  if (!claimed.empty() && claimed != call.relay.name) {
    return core::Fail(
        core::Error(core::ErrorCode::kPermissionDenied, "relay_name_mismatch",
                    "A relay reports under the name its relay credential was registered with; "
                    "leave out 'relay' or give that name.")
            .WithDetail("relay", call.relay.name));
  }
  return call.relay.name;
}

/// An RFC 3339 UTC time field as Unix seconds.
core::Result<int64_t> TimeField(const std::string& text, const std::string& field) {
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

/// The row a report (protocol::RelaySessionReport, which checks shapes and lengths) from the
/// relay of `call` files, once its values make sense: a valid id, the relay's own name, an IP
/// address, times in order and not in the future.
core::Result<access::RelaySessionRow> ParseReport(const Call& call, const std::string& id,
                                                  const nlohmann::json& body, int64_t now) {
  access::RelaySessionRow row;
  if (!ValidSessionId(id)) {
    return core::InvalidArgument("invalid_relay_session",
                                 "A relay session id is 1 to 128 letters, digits, '_' or '-'.");
  }
  GPUWERK_ASSIGN_OR_RETURN(protocol::RelaySessionReport report,
                           protocol::RelaySessionReportFromJson(body));
  row.id = id;
  GPUWERK_ASSIGN_OR_RETURN(row.relay, RelayName(call, report.relay));
  row.person_id = std::move(report.person_id);
  row.instance_id = std::move(report.instance_id);
  // The relay's free text goes into the row and the audit details in its bounded printable form
  // nothing a relay says is trusted beyond itself).
  row.key_fingerprint = core::BoundedPrintable(report.key_fingerprint);
  row.hostname = core::BoundedPrintable(report.hostname);
  row.login = core::BoundedPrintable(report.login);
  row.source_address = std::move(report.source_address);
  if (!IsIpLiteral(row.source_address)) {
    return core::Fail(
        InvalidField("source_address", "source_address must be an IPv4 or IPv6 address."));
  }
  GPUWERK_ASSIGN_OR_RETURN(row.started_at, TimeField(report.started_at, "started_at"));
  if (row.started_at > now + kClockSkewSeconds) {
    return core::Fail(InvalidField("started_at", "started_at is in the future."));
  }
  if (report.ended_at) {
    GPUWERK_ASSIGN_OR_RETURN(row.ended_at, TimeField(*report.ended_at, "ended_at"));
    if (*row.ended_at < row.started_at) {
      return core::Fail(InvalidField("ended_at", "ended_at is before started_at."));
    }
    if (*row.ended_at > now + kClockSkewSeconds) {
      return core::Fail(InvalidField("ended_at", "ended_at is in the future."));
    }
  }
  row.bytes_from_client = report.bytes_from_client;
  row.bytes_to_client = report.bytes_to_client;
  row.end_reason = core::BoundedPrintable(report.end_reason);
  return row;
}

}  // namespace

namespace handlers {

Answer AuthorizeRelayLogin(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonBody(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto request, protocol::RelayAuthorizeRequestFromJson(body));
  GPUWERK_ASSIGN_OR_RETURN(auto decision, ctx.relay_access.Authorize(request));
  return Response::Json(200, protocol::ToJson(decision));
}

Answer ReportRelaySession(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonBody(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           ParseReport(call, call.req.PathParam("id"), body, ctx.clock.NowUnix()));
  GPUWERK_ASSIGN_OR_RETURN(
      bool recorded, ctx.db.Write([&](store::Transaction& tx) -> core::Result<bool> {
        // The person must be the instance's owner: a report cannot file a relay session under
        // someone else's instance (it would show in their list).
        GPUWERK_ASSIGN_OR_RETURN(
            auto owned, sched::InstanceTable::FindOwned(tx, row.person_id, row.instance_id));
        if (!owned) {
          return core::Fail(InvalidField(
              "instance_id", "instance_id is not an instance of person_id on this server."));
        }
        return row.ended_at ? access::RecordRelaySessionEnd(tx, ctx.clock, ctx.rng, row)
                            : access::RecordRelaySessionStart(tx, ctx.clock, ctx.rng, row);
      }));
  return Response::Json(200, {{"id", row.id}, {"recorded", recorded}});
}

Answer RelayRestarted(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonBody(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto restarted, protocol::RelayRestartedFromJson(body));
  GPUWERK_ASSIGN_OR_RETURN(auto relay, RelayName(call, restarted.relay));
  GPUWERK_ASSIGN_OR_RETURN(auto closed, ctx.db.Write([&](store::Transaction& tx) {
    return access::CloseOpenRelaySessions(tx, ctx.clock, ctx.rng, relay, ctx.clock.NowUnix());
  }));
  return Response::Json(200, {{"relay", relay}, {"closed", closed}});
}

/// Refusal reports one relay may send a minute (it sends one a minute, and one at stop).
constexpr int kRefusalReportsPerMinute = 10;

Answer ReportRelayRefusals(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonBody(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto report, protocol::RelayRefusalReportFromJson(body));
  for (const auto& g : report.refusals) {
    if (!IsIpLiteral(g.source_address)) {
      return core::Fail(
          InvalidField("source_address", "source_address must be an IPv4 or IPv6 address."));
    }
  }
  const std::string relay = call.relay.name;
  const auth::RateRule rule{.scope = "relay_refusal_reports",
                            .limit = kRefusalReportsPerMinute,
                            .window = std::chrono::seconds(60)};
  auth::RateLimiter limiter(ctx.clock);
  GPUWERK_ASSIGN_OR_RETURN(
      size_t recorded, ctx.db.Write([&](store::Transaction& tx) -> core::Result<size_t> {
        GPUWERK_ASSIGN_OR_RETURN(auto retry, limiter.RetryAfter(tx, rule, relay));
        if (retry) {
          return std::unexpected(auth::RateLimiter::Limited(
              "Too many refusal reports from this relay; it sends one a minute.", *retry));
        }
        GPUWERK_TRY(limiter.Record(tx, rule, relay));
        for (const auto& g : report.refusals) {
          GPUWERK_TRY(access::RecordRelayRefusal(tx, ctx.clock, ctx.rng, relay, g));
        }
        GPUWERK_TRY(
            access::RecordDroppedRelayRefusals(tx, ctx.clock, ctx.rng, relay, report.dropped));
        return report.refusals.size();
      }));
  return Response::Json(200, {{"recorded", recorded}});
}

Answer RecheckRelaySessions(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body, ParseJsonBody(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto batch, protocol::RelayRecheckRequestFromJson(body));
  std::vector<protocol::RelayRecheckResult> results;
  results.reserve(batch.relay_sessions.size());
  for (const auto& item : batch.relay_sessions) {
    GPUWERK_ASSIGN_OR_RETURN(auto decision, ctx.relay_access.Authorize(item.request));
    protocol::RelayRecheckResult r{.id = item.id};
    r.allowed = decision.target && decision.target->instance_id == item.instance_id &&
                decision.target->login == item.login;
    // A refusal's message stays "": the relay says it in its own words, naming the hostname.
    results.push_back(std::move(r));
  }
  return Response::Json(200, protocol::ToJson(results));
}

Answer WatchRelayAccess(ApiContext& ctx, Call& call) {
  if (ctx.relay_watch == nullptr) return core::NotFound("relay watch");
  // The stream outlives this request: the relay's credential is checked again at every change
  // and heartbeat, and at once when a credential is revoked (AdminRevokeRelay), so that revoking
  // it ends the stream (and the relay then re-checks at once, and is refused).
  std::string secret(call.req.Header("Authorization").substr(std::string_view("Bearer ").size()));
  auto still_allowed = [&ctx, secret = std::move(secret), id = call.relay.id] {
    auto now = ctx.relay_credentials.Authenticate(secret);
    if (now) return now->id == id;
    // A store that is busy or away is no answer: ask again next time.
    return now.error().code != core::ErrorCode::kUnauthenticated;
  };
  GPUWERK_ASSIGN_OR_RETURN(auto producer, ctx.relay_watch->Open(std::move(still_allowed)));
  Response r;
  r.SetHeader("Content-Type", "text/event-stream");  // always UTF-8 (WHATWG HTML §9.2)
  r.stream = std::move(producer);
  return r;
}

}  // namespace handlers
}  // namespace gpuwerk::api
