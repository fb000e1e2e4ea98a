#include "api/idempotency.h"

#include <nlohmann/json.hpp>

#include "core/encoding.h"
#include "sched/idempotency_key_table.h"

namespace gpuwerk::api {

core::Result<std::string> IdempotencyKeys::KeyOf(const Request& req) {
  std::string key(req.Header("Idempotency-Key"));
  bool ok = key.size() <= 255;
  for (char c : key) ok = ok && c >= 0x21 && c <= 0x7e;
  if (!ok) {
    return core::InvalidArgument("invalid_idempotency_key",
                                 "The Idempotency-Key header must be 1 to 255 printable ASCII "
                                 "characters without spaces.");
  }
  return key;
}

std::string IdempotencyKeys::RequestHash(const Request& req) {
  auto body = nlohmann::json::parse(req.body, nullptr, false);
  const std::string normalised = body.is_discarded() ? req.body : body.dump();
  std::string path = req.target.substr(0, req.target.find('?'));
  return core::HexEncode(core::Sha256(req.method + " " + path + "\n" + normalised));
}

core::Result<std::optional<Response>> IdempotencyKeys::Replay(const std::string& person_id,
                                                              const std::string& key,
                                                              const std::string& request_hash) {
  const int64_t since = clock_.NowUnix() - kLifetimeSeconds;
  GPUWERK_ASSIGN_OR_RETURN(auto record, db_.Read([&](store::Transaction& tx) {
    return sched::IdempotencyKeyTable::FindSince(tx, person_id, key, since);
  }));
  if (!record) return std::optional<Response>();
  if (record->request_hash != request_hash) {
    return core::Fail(core::ErrorCode::kFailedPrecondition, "idempotency_key_reused",
                      "This Idempotency-Key was used within the last 24 hours for a different "
                      "request; use a new key for a new request.");
  }
  Response r;
  r.status = record->status;
  r.body = record->response;
  r.SetHeader("Content-Type", "application/json");
  r.SetHeader("Idempotent-Replayed", "true");
  return std::optional<Response>(std::move(r));
}

core::Result<void> IdempotencyKeys::Record(store::Transaction& tx, const std::string& person_id,
                                           const std::string& key, const std::string& request_hash,
                                           int status, const std::string& body) {
  const int64_t now = clock_.NowUnix();
  GPUWERK_ASSIGN_OR_RETURN(
      auto live, sched::IdempotencyKeyTable::FindSince(tx, person_id, key, now - kLifetimeSeconds));
  if (live) {
    return core::Fail(core::ErrorCode::kAlreadyExists, kReplayCode,
                      "A request with this Idempotency-Key was answered already.");
  }
  return sched::IdempotencyKeyTable::Replace(
      tx, person_id, key,
      {.request_hash = request_hash, .status = status, .response = body, .created_at = now});
}

core::Result<int64_t> IdempotencyKeys::Purge() {
  const int64_t before = clock_.NowUnix() - kLifetimeSeconds;
  return db_.Write(
      [&](store::Transaction& tx) { return sched::IdempotencyKeyTable::PurgeUntil(tx, before); });
}

}  // namespace gpuwerk::api
