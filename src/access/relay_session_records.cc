#include "access/relay_session_records.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "audit/audit_log.h"
#include "auth/person_table.h"

namespace gpuwerk::access {
namespace {

using store::Row;
using store::Value;

constexpr const char* kColumns =
    "r.id, r.relay, r.person_id, r.key_fingerprint, r.instance_id, r.hostname, r.login, "
    "r.source_address, r.started_at, r.ended_at, r.bytes_from_client, r.bytes_to_client, "
    "r.end_reason";

RelaySessionRow FromRow(const Row& r) {
  RelaySessionRow out;
  out.id = r.Text("id");
  out.relay = r.Text("relay");
  out.person_id = r.Text("person_id");
  out.key_fingerprint = r.Text("key_fingerprint");
  out.instance_id = r.Text("instance_id");
  out.hostname = r.Text("hostname");
  out.login = r.Text("login");
  out.source_address = r.Text("source_address");
  out.started_at = r.Int("started_at");
  out.ended_at = r.OptInt("ended_at");
  out.bytes_from_client = r.Int("bytes_from_client");
  out.bytes_to_client = r.Int("bytes_to_client");
  out.end_reason = r.Text("end_reason");
  return out;
}

core::Result<void> Validate(const RelaySessionRow& row) {
  for (const auto* field : {&row.id, &row.relay, &row.person_id, &row.instance_id}) {
    if (field->empty()) {
      return core::InvalidArgument("invalid_relay_session",
                                   "A relay session record needs an id, a relay, a person and an "
                                   "instance.");
    }
  }
  if (row.bytes_from_client < 0 || row.bytes_to_client < 0) {
    return core::InvalidArgument("invalid_relay_session", "Byte counts cannot be negative.");
  }
  return {};
}

core::Error Conflict(const RelaySessionRow& row, const std::string& other_relay) {
  return core::Error(core::ErrorCode::kAlreadyExists, "relay_session_conflict",
                     "Relay session " + row.id + " was recorded by relay '" + other_relay +
                         "', not '" + row.relay + "'.");
}

nlohmann::json Detail(const RelaySessionRow& row) {
  return {
      {"relay_session_id", row.id}, {"relay", row.relay}, {"key_fingerprint", row.key_fingerprint},
      {"hostname", row.hostname},   {"login", row.login}, {"started_at", row.started_at}};
}

core::Result<void> Audit(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                         const RelaySessionRow& row, const char* action, nlohmann::json detail) {
  return audit::RecordAudit(tx, clock, rng,
                            {.actor_id = row.person_id,
                             .action = action,
                             .target = row.instance_id,
                             .source_address = row.source_address,
                             .detail = std::move(detail)});
}

}  // namespace

core::Result<bool> RecordRelaySessionStart(store::Transaction& tx, core::Clock& clock,
                                           core::Rng& rng, const RelaySessionRow& row) {
  GPUWERK_TRY(Validate(row));
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t inserted,
      tx.Exec("INSERT INTO relay_sessions (id, relay, person_id, key_fingerprint, instance_id, "
              "hostname, login, source_address, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (id) DO NOTHING",
              {row.id, row.relay, row.person_id, row.key_fingerprint, row.instance_id, row.hostname,
               row.login, row.source_address, row.started_at}));
  if (inserted == 0) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto existing, tx.QueryOne("SELECT relay FROM relay_sessions WHERE id = ?", {row.id}));
    if (existing && existing->Text(0) != row.relay) {
      return core::Fail(Conflict(row, existing->Text(0)));
    }
    return false;
  }
  GPUWERK_TRY(Audit(tx, clock, rng, row, "relay_session.start", Detail(row)));
  return true;
}

core::Result<bool> RecordRelaySessionEnd(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                         const RelaySessionRow& row) {
  GPUWERK_TRY(Validate(row));
  if (!row.ended_at) {
    return core::InvalidArgument("invalid_relay_session",
                                 "The end of a relay session needs its end time.");
  }
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t updated,
      tx.Exec("UPDATE relay_sessions SET ended_at = ?, bytes_from_client = ?, bytes_to_client = ?, "
              "end_reason = ? WHERE id = ? AND relay = ? AND ended_at IS NULL",
              {*row.ended_at, row.bytes_from_client, row.bytes_to_client, row.end_reason, row.id,
               row.relay}));
  if (updated == 0) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto existing, tx.QueryOne("SELECT relay FROM relay_sessions WHERE id = ?", {row.id}));
    if (existing) {
      if (existing->Text(0) != row.relay) return core::Fail(Conflict(row, existing->Text(0)));
      return false;  // already ended: the first end is final
    }
    GPUWERK_TRY(tx.Exec(
        "INSERT INTO relay_sessions (id, relay, person_id, key_fingerprint, instance_id, hostname, "
        "login, source_address, started_at, ended_at, bytes_from_client, bytes_to_client, "
        "end_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        {row.id, row.relay, row.person_id, row.key_fingerprint, row.instance_id, row.hostname,
         row.login, row.source_address, row.started_at, *row.ended_at, row.bytes_from_client,
         row.bytes_to_client, row.end_reason}));
  }
  nlohmann::json detail = Detail(row);
  detail["ended_at"] = *row.ended_at;
  detail["bytes_from_client"] = row.bytes_from_client;
  detail["bytes_to_client"] = row.bytes_to_client;
  detail["end_reason"] = row.end_reason;
  GPUWERK_TRY(Audit(tx, clock, rng, row, "relay_session.end", std::move(detail)));
  return true;
}

core::Result<int64_t> CloseOpenRelaySessions(store::Transaction& tx, core::Clock& clock,
                                             core::Rng& rng, const std::string& relay,
                                             int64_t ended_at) {
  // ended_at never before started_at, whatever the clocks did.
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t closed,
      tx.Exec("UPDATE relay_sessions SET ended_at = CASE WHEN started_at > ? THEN started_at "
              "ELSE ? END, end_reason = ? WHERE relay = ? AND ended_at IS NULL",
              {ended_at, ended_at, std::string(kRelayRestartedReason), relay}));
  if (closed > 0) {
    GPUWERK_TRY(
        audit::RecordAudit(tx, clock, rng,
                           {.actor_id = "",
                            .action = "relay.restarted",
                            .target = relay,
                            .source_address = "system",
                            .detail = {{"relay", relay}, {"closed_relay_sessions", closed}}}));
  }
  return closed;
}

core::Result<RelaySessionPage> ListRelaySessions(store::Transaction& tx,
                                                 const RelaySessionFilter& filter, int page) {
  if (page < 1) return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  const std::string from = " FROM relay_sessions r ";
  const std::string order = " ORDER BY r.started_at DESC, r.id DESC LIMIT ? OFFSET ?";
  const int64_t limit = kRelaySessionPageSize;
  const int64_t offset = static_cast<int64_t>(page - 1) * kRelaySessionPageSize;
  // One statement per filter shape, so each can use its index.
  auto run = [&](const std::string& where, auto... params) -> core::Result<RelaySessionPage> {
    RelaySessionPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(
        auto count,
        tx.QueryOne("SELECT COUNT(*) FROM relay_sessions r " + where, {Value(params)...}));
    out.total = count ? count->Int(0) : 0;
    out.pages = static_cast<int>(
        std::max<int64_t>(1, (out.total + kRelaySessionPageSize - 1) / kRelaySessionPageSize));
    GPUWERK_ASSIGN_OR_RETURN(auto rows,
                             tx.Query(std::string("SELECT ") + kColumns + from + where + order,
                                      {Value(params)..., Value(limit), Value(offset)}));
    for (const auto& r : rows) {
      RelaySessionRow item = FromRow(r);
      // The email from its owner (auth); "" when the person is gone.
      GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, item.person_id));
      item.person_email = email.value_or("");
      out.items.push_back(std::move(item));
    }
    return out;
  };
  const bool by_instance = !filter.instance_id.empty();
  const bool by_person = !filter.person_id.empty();
  if (by_instance && by_person) {
    return run("WHERE r.instance_id = ? AND r.person_id = ?", filter.instance_id, filter.person_id);
  }
  if (by_instance) return run("WHERE r.instance_id = ?", filter.instance_id);
  if (by_person) return run("WHERE r.person_id = ?", filter.person_id);
  return run("");
}

}  // namespace gpuwerk::access
