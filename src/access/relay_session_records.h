#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "store/database.h"

namespace gpuwerk::access {

/// One relay session as the store keeps it (DESIGN.md R-10; table `relay_sessions`, migration
/// 6): one SSH connection through a relay, from the client's proven login to its end.
struct RelaySessionRow {
  std::string id;     ///< given by the relay: "rls_" + 16 random base32 chars
  std::string relay;  ///< which relay: "local" for `gpuwerk up`'s own, else the relay's --name
  std::string person_id;
  std::string
      person_email;  ///< filled by ListRelaySessions (auth::PersonTable::Email); ignored on writes
  std::string key_fingerprint;  ///< "SHA256:…"
  std::string instance_id;
  std::string hostname;
  std::string login;
  std::string source_address;       ///< the client's IP address
  int64_t started_at = 0;           ///< Unix seconds
  std::optional<int64_t> ended_at;  ///< Unix seconds; nullopt while open
  int64_t bytes_from_client = 0;    ///< SSH channel payload bytes, client → instance
  int64_t bytes_to_client = 0;      ///< SSH channel payload bytes, instance → client
  std::string end_reason;           ///< "" while open; e.g. "client closed", "relay restarted"
};

/// The end reason of rows closed because their relay started again (it crashed or was killed
/// before it could report their end).
inline constexpr const char* kRelayRestartedReason = "relay restarted";

/// Records a relay session's start: inserts the row (open: ended_at, bytes and reason are
/// ignored) unless a row with this id exists, in which case nothing changes (a relay retrying
/// its report makes no second row). Audits `relay_session.start` (actor the person, target the
/// instance, source the client's address) only when it inserted. Returns whether it inserted.
/// Errors: kInvalidArgument "invalid_relay_session" when id, relay, person_id or instance_id is
/// empty; kAlreadyExists "relay_session_conflict" when the id belongs to another relay; the
/// store's.
core::Result<bool> RecordRelaySessionStart(store::Transaction& tx, core::Clock& clock,
                                           core::Rng& rng, const RelaySessionRow& row);

/// Records a relay session's end (`row.ended_at` must be set): an open row with this id gets its
/// ended_at, byte counts and end_reason; an absent one is inserted whole (its start report was
/// lost); an already ended one is left as it is (the first end is final, so a retried report
/// changes nothing). Audits `relay_session.end` (with bytes and reason) only when it changed
/// something. Returns whether it did. Errors: as RecordRelaySessionStart, and
/// "invalid_relay_session" without ended_at.
core::Result<bool> RecordRelaySessionEnd(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                                         const RelaySessionRow& row);

/// Ends every still-open row of `relay` at `ended_at` (Unix seconds) with end_reason
/// kRelayRestartedReason: call it when that relay starts, before it records anything, since a
/// relay process that crashed left its open rows behind. Their bytes stay as last reported (0
/// when only the start was). Audits `relay.restarted` (detail: relay, closed) when it closed
/// any. Returns how many it closed. Errors: the store's.
core::Result<int64_t> CloseOpenRelaySessions(store::Transaction& tx, core::Clock& clock,
                                             core::Rng& rng, const std::string& relay,
                                             int64_t ended_at);

/// Which rows ListRelaySessions returns; empty fields do not filter. Both set: rows that match
/// both.
struct RelaySessionFilter {
  std::string instance_id;
  std::string person_id;
};

/// One page of relay sessions.
struct RelaySessionPage {
  std::vector<RelaySessionRow> items;
  int page = 1;
  int pages = 1;
  int64_t total = 0;
};

/// Relay sessions matching `filter`, 15 a page (`page` is 1-based), newest first in a stable
/// order (started_at DESC, id DESC), each with the person's email. A page past the last is
/// empty (with the real `pages` and `total`). Errors: kInvalidArgument "invalid_page" when
/// page < 1; the store's.
core::Result<RelaySessionPage> ListRelaySessions(store::Transaction& tx,
                                                 const RelaySessionFilter& filter, int page);

/// The number of rows a page of ListRelaySessions holds.
inline constexpr int kRelaySessionPageSize = 15;

}  // namespace gpuwerk::access
