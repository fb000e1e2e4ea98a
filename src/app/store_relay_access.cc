#include "app/store_relay_access.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "access/relay_refusals.h"
#include "access/relay_session_records.h"
#include "core/time_format.h"
#include "relay/http_relay_authorizer.h"

namespace gpuwerk::app {

core::Result<relay::AuthorizeDecision> StoreRelayAuthorizer::Authorize(
    const relay::AuthorizeRequest& request) {
  GPUWERK_ASSIGN_OR_RETURN(auto decision, access_.Authorize(relay::ToWire(request)));
  return relay::FromWire(decision);
}

namespace {

int64_t UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

int64_t Bytes(uint64_t n) {
  return static_cast<int64_t>(
      std::min<uint64_t>(n, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

access::RelaySessionRow RowOf(const relay::RelaySessionRecord& r, bool ended) {
  access::RelaySessionRow row;
  row.id = r.id;
  row.relay = AuditRelaySessionLog::kRelayName;
  row.person_id = r.person_id;
  row.key_fingerprint = r.key_fingerprint;
  row.instance_id = r.instance_id;
  row.hostname = r.hostname;
  row.login = r.login;
  row.source_address = r.source_address;
  row.started_at = UnixSeconds(r.started_at);
  if (ended) {
    row.ended_at = std::max(row.started_at, UnixSeconds(r.ended_at));
    row.bytes_from_client = Bytes(r.bytes_from_client);
    row.bytes_to_client = Bytes(r.bytes_to_client);
    row.end_reason = r.end_reason;
  }
  return row;
}

}  // namespace

core::Result<int64_t> AuditRelaySessionLog::CloseLeftOpen() {
  return db_.Write([&](store::Transaction& tx) {
    return access::CloseOpenRelaySessions(tx, clock_, rng_, kRelayName, clock_.NowUnix());
  });
}

void AuditRelaySessionLog::OnStart(const relay::RelaySessionRecord& r) {
  const access::RelaySessionRow row = RowOf(r, /*ended=*/false);
  auto done = db_.Write([&](store::Transaction& tx) {
    return access::RecordRelaySessionStart(tx, clock_, rng_, row);
  });
  if (!done) spdlog::error("relay: cannot record relay session {}: {}", r.id, done.error().message);
}

void AuditRelaySessionLog::OnEnd(const relay::RelaySessionRecord& r) {
  const access::RelaySessionRow row = RowOf(r, /*ended=*/true);
  auto done = db_.Write(
      [&](store::Transaction& tx) { return access::RecordRelaySessionEnd(tx, clock_, rng_, row); });
  if (!done) {
    spdlog::error("relay: cannot record the end of relay session {}: {}", r.id,
                  done.error().message);
  }
}

void AuditRelaySessionLog::OnRefused(const relay::RelayRefusalRecord& r) {
  // One event per refusal (a group of one): the in-process relay's refusals are bounded by its
  // own admission limits (docs/ssh.md "Refusals of a remote relay" for the remote relays').
  const std::string at = core::FormatRfc3339(UnixSeconds(r.at));
  const protocol::RelayRefusalGroup group{.code = r.code,
                                          .user = r.user,
                                          .key_fingerprint = r.key_fingerprint,
                                          .person_id = r.person_id,
                                          .instance_id = r.instance_id,
                                          .source_address = r.source_address,
                                          .expected_host_key = r.expected_host_key,
                                          .presented_host_key = r.presented_host_key,
                                          .count = 1,
                                          .first_at = at,
                                          .last_at = at};
  auto done = db_.Write([&](store::Transaction& tx) -> core::Result<void> {
    return access::RecordRelayRefusal(tx, clock_, rng_, kRelayName, group);
  });
  if (!done) spdlog::error("relay: cannot record relay_session.refused: {}", done.error().message);
}

}  // namespace gpuwerk::app
