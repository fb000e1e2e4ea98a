#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace gpuwerk::protocol {

// What a remote `gpuwerk relay` asks and reports (docs/ssh.md, "The remote relay's reports"; the
// routes are described in api/relay_routes.h). FromJson functions are strict as in
// agent_sync.h: a missing, null (unless optional) or mistyped member is refused with
// kInvalidArgument "invalid_field" naming it. What a relay sends the server (the authorize
// request, the session report, the restart) also refuses members the format does not define,
// naming them; the decision the relay reads ignores them.
// Pure and thread-safe.

/// The body of `POST /api/v1/relay/authorize`: one client's proven login attempt. Each field is
/// 1 to 16,384 characters.
struct RelayAuthorizeRequest {
  std::string user;            ///< the SSH user name exactly as the client sent it
  std::string key_type;        ///< e.g. "ssh-ed25519"
  std::string public_key;      ///< the public key blob (RFC 4253 §6.6), base64
  std::string fingerprint;     ///< "SHA256:…" as `ssh-keygen -l` prints it
  std::string source_address;  ///< the client's IP address, numeric, no port

  bool operator==(const RelayAuthorizeRequest&) const = default;
};

/// Where an allowed login goes (the decision's `target`).
struct RelayTarget {
  std::string instance_id;
  std::string instance_name;    ///< the person's name for it, e.g. "alpha"
  std::string hostname;         ///< globally unique, e.g. "alpha-k3x7q"
  std::string upstream_host;    ///< `upstream.host`: the instance's sshd, host name or address
  uint16_t upstream_port = 22;  ///< `upstream.port`: its TCP port (0–65535)
  std::string login;            ///< the Linux login inside the instance, e.g. "root"
  std::string person_id;        ///< who is logging in
  /// The instance sshd's host key as "SHA256:…"; "" when not pinned.
  std::string upstream_host_key_fingerprint;

  bool operator==(const RelayTarget&) const = default;
};

/// The answer of `POST /api/v1/relay/authorize`: `{"decision":"allow","target":{…}}` or
/// `{"decision":"refuse","code":"not_authorized","message":…}`.
struct RelayAuthorizeDecision {
  std::optional<RelayTarget> target;  ///< set: allow
  std::string code;                   ///< refuse only: "not_authorized"
  std::string message;                ///< refuse only: for the person, one or more lines

  static RelayAuthorizeDecision Allow(RelayTarget t) { return {std::move(t), {}, {}}; }
  static RelayAuthorizeDecision Refuse(std::string message) {
    return {std::nullopt, "not_authorized", std::move(message)};
  }
  bool operator==(const RelayAuthorizeDecision&) const = default;
};

/// The body of `PUT /api/v1/relay/sessions/{id}`: one relay session's start (ended_at null) or
/// end. Times are RFC 3339 UTC text ("2026-01-02T03:04:05Z", 1–64 characters); byte counts are
/// bytes, from 0. `relay`, when present, has 1–128 characters, `person_id` and `instance_id`
/// 1–256, `key_fingerprint`, `hostname`, `login` and `source_address` at most 512, `end_reason` at
/// most 1024.
struct RelaySessionReport {
  /// The reporting relay's name; "" (left out on the wire): the name its credential was
  /// registered under, which the server uses either way (a different name is refused).
  std::string relay;
  std::string person_id;
  std::string key_fingerprint;
  std::string instance_id;
  std::string hostname;
  std::string login;
  std::string source_address;
  std::string started_at;
  std::optional<std::string> ended_at;  ///< null on the wire while the relay session is open
  int64_t bytes_from_client = 0;
  int64_t bytes_to_client = 0;
  std::string end_reason;  ///< "" while open

  bool operator==(const RelaySessionReport&) const = default;
};

/// The body of `POST /api/v1/relay/restarted`: `{}`, or `{"relay": name}` (1–128 characters),
/// which must then be the name the relay's credential was registered under.
struct RelayRestarted {
  std::string relay;  ///< "" (left out on the wire): the credential's name

  bool operator==(const RelayRestarted&) const = default;
};

/// One open relay session in `POST /api/v1/relay/recheck` (docs/ssh.md "Revocation"):
/// `{"id":"rls_…","instance_id":…,"login":…,"request":{…RelayAuthorizeRequest…}}`. `id` and
/// `instance_id` have 1–256 characters, `login` 1–512.
struct RelayRecheckItem {
  std::string id;  ///< the relay session's id
  std::string instance_id;
  std::string login;
  RelayAuthorizeRequest request;  ///< what the relay asked at login
  bool operator==(const RelayRecheckItem&) const = default;
};

/// The most relay sessions one `POST /api/v1/relay/recheck` may carry; a relay with more
/// sends several batches.
inline constexpr size_t kMaxRecheckBatch = 1000;

/// The body of `POST /api/v1/relay/recheck`: `{"relay_sessions":[RelayRecheckItem…]}`, at most
/// kMaxRecheckBatch items.
struct RelayRecheckRequest {
  std::vector<RelayRecheckItem> relay_sessions;
};

/// One result of `POST /api/v1/relay/recheck`, in the order asked:
/// `{"id":…,"allowed":true}` or `{"id":…,"allowed":false,"message":…}` (for the person).
struct RelayRecheckResult {
  std::string id;
  bool allowed = false;
  std::string message;
  bool operator==(const RelayRecheckResult&) const = default;
};

/// One `event: access` of `GET /api/v1/relay/watch` (server-sent events): what may have lost
/// access (core::AccessChange): `{"instance_ids":[…],"person_ids":[…],"key_fingerprints":[…],
/// "reason":…}`, each list at most kMaxRecheckBatch strings.
struct RelayAccessChange {
  std::vector<std::string> instance_ids;
  std::vector<std::string> person_ids;
  std::vector<std::string> key_fingerprints;
  std::string reason;
  bool operator==(const RelayAccessChange&) const = default;
};

/// One group of refused logins in `POST /api/v1/relay/refusals` (docs/ssh.md "Refusals of a
/// remote relay"): the refusals of one minute that agree in every field but the count and the
/// times (relay::RelayRefusalRecord). `code` has 1–64 characters; `user` is the SSH user name
/// escaped and bounded once, by the relay (core::BoundedPrintable; a `user` not in that form,
/// core::IsBoundedPrintable, is refused), `key_fingerprint`, `source_address` and the host keys
/// at most 512; `person_id` and `instance_id` at most 256, as the relay claims them (the server
/// checks them against its store: access::RecordRelayRefusal); times RFC 3339 UTC; `count` 1 to
/// 1,000,000.
struct RelayRefusalGroup {
  std::string code;
  std::string user;
  std::string key_fingerprint;
  std::string person_id;    ///< "" unless the authorizer had let the login through
  std::string instance_id;  ///< "" unless the authorizer had let the login through
  std::string source_address;
  std::string expected_host_key;   ///< upstream_host_key_mismatch only
  std::string presented_host_key;  ///< upstream_host_key_mismatch only
  int64_t count = 1;
  std::string first_at;
  std::string last_at;
  bool operator==(const RelayRefusalGroup&) const = default;
};

/// The most groups one `POST /api/v1/relay/refusals` may carry (and a relay keeps a minute).
inline constexpr size_t kMaxRefusalGroups = 100;

/// The body of `POST /api/v1/relay/refusals`: `{"refusals":[RelayRefusalGroup…],
/// "dropped":N}`, at most kMaxRefusalGroups groups; `dropped` (0 to 2^53) counts the refusals of
/// the period that fitted in no group (past kMaxRefusalGroups).
struct RelayRefusalReport {
  std::vector<RelayRefusalGroup> refusals;
  int64_t dropped = 0;
  bool operator==(const RelayRefusalReport&) const = default;
};

nlohmann::json ToJson(const RelayRefusalReport& report);
/// Errors: invalid_field (also past kMaxRefusalGroups or a field's bounds).
core::Result<RelayRefusalReport> RelayRefusalReportFromJson(const nlohmann::json& json);

nlohmann::json ToJson(const RelayRecheckRequest& request);
nlohmann::json ToJson(const std::vector<RelayRecheckResult>& results);
nlohmann::json ToJson(const RelayAccessChange& change);
/// Errors: invalid_field, also for more than kMaxRecheckBatch items.
core::Result<RelayRecheckRequest> RelayRecheckRequestFromJson(const nlohmann::json& json);
/// `{"results":[…]}`. Errors: invalid_field.
core::Result<std::vector<RelayRecheckResult>> RelayRecheckResultsFromJson(
    const nlohmann::json& json);
/// Errors: invalid_field.
core::Result<RelayAccessChange> RelayAccessChangeFromJson(const nlohmann::json& json);

nlohmann::json ToJson(const RelayAuthorizeRequest& request);
nlohmann::json ToJson(const RelayAuthorizeDecision& decision);
nlohmann::json ToJson(const RelaySessionReport& report);
nlohmann::json ToJson(const RelayRestarted& restarted);

/// Errors: invalid_field (above), also for a field out of its bounds.
core::Result<RelayAuthorizeRequest> RelayAuthorizeRequestFromJson(const nlohmann::json& json);
/// Also refuses a `decision` other than "allow" and "refuse" (field "decision").
core::Result<RelayAuthorizeDecision> RelayAuthorizeDecisionFromJson(const nlohmann::json& json);
/// `ended_at` may be missing or null (open); `end_reason` too ("").
core::Result<RelaySessionReport> RelaySessionReportFromJson(const nlohmann::json& json);
core::Result<RelayRestarted> RelayRestartedFromJson(const nlohmann::json& json);

}  // namespace gpuwerk::protocol
