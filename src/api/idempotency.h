#pragma once

#include <optional>
#include <string>

#include "api/http_types.h"
#include "core/clock.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::api {

/// `Idempotency-Key` support for creating POSTs (POST /api/v1/instances and
/// /api/v1/queue-entries): the same key from the same person within 24 hours answers the first
/// request's answer again and creates nothing new. The answer is stored in the
/// `idempotency_keys` table in the same transaction as the change it reports, so a stored
/// answer always describes a committed change, and a change never commits without its answer.
/// Only successful answers are stored: a refused request changed nothing, so repeating it is
/// already safe. A key reused with a different request (method, path or JSON body) is refused
/// with 409 idempotency_key_reused. Thread-safe (state lives in the store).
class IdempotencyKeys {
 public:
  /// How long a key is remembered, in seconds.
  static constexpr int64_t kLifetimeSeconds = 24 * 60 * 60;
  /// The api code of the error Record returns when another request with the same key committed
  /// first; the handler then answers Replay's answer.
  static constexpr const char* kReplayCode = "idempotency_replay";

  IdempotencyKeys(store::Database& db, core::Clock& clock) : db_(db), clock_(clock) {}

  /// The request's key ("" when the header is absent). Errors: kInvalidArgument
  /// invalid_idempotency_key (longer than 255 bytes or not printable ASCII).
  static core::Result<std::string> KeyOf(const Request& req);
  /// The hash a request is recognised by: SHA-256 hex of method, path and the normalised JSON
  /// body.
  static std::string RequestHash(const Request& req);

  /// The stored answer for (`person_id`, `key`) younger than kLifetimeSeconds, nullopt when
  /// none. Errors: kFailedPrecondition (409) idempotency_key_reused (stored for another request);
  /// the store's.
  core::Result<std::optional<Response>> Replay(const std::string& person_id, const std::string& key,
                                               const std::string& request_hash);
  /// Stores the answer inside `tx`. Errors: kReplayCode when a live record for the key exists
  /// already (a concurrent request committed first); the store's.
  core::Result<void> Record(store::Transaction& tx, const std::string& person_id,
                            const std::string& key, const std::string& request_hash, int status,
                            const std::string& body);
  /// Deletes records older than kLifetimeSeconds. Returns how many. Errors: the store's.
  core::Result<int64_t> Purge();

 private:
  store::Database& db_;
  core::Clock& clock_;
};

}  // namespace gpuwerk::api
