#include "api/handler_support.h"

#include <charconv>
#include <utility>

namespace gpuwerk::api {

Response ErrorResponse(const core::Error& error) {
  Response r = Problem(error);
  if (error.details.contains("retry_after_seconds")) {
    r.headers.emplace_back("Retry-After", error.details["retry_after_seconds"].dump());
  }
  return r;
}

nlohmann::json PaymentHoldJson(const std::optional<billing::PaymentHold>& hold) {
  if (!hold) return nullptr;
  return {{"invoice_id", hold->provider_ref},
          {"reason", hold->reason},
          {"since", core::FormatRfc3339(hold->created_at)}};
}

nlohmann::json PersonJson(const auth::Person& p) {
  return {{"id", p.id},
          {"email", p.email},
          {"is_operator", p.is_operator},
          {"has_password", p.has_password},
          {"email_proven", p.email_proven_at.has_value()},
          {"created_at", core::FormatRfc3339(p.created_at)}};
}

core::Result<int> PageParam(const Request& req) {
  auto page = req.QueryInt("page", 1);
  if (!page || *page < 1 || *page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  return static_cast<int>(*page);
}

core::Result<Response> IdempotentCreate(
    ApiContext& ctx, const Call& call,
    const std::function<core::Result<Response>(const RecordAnswer& record)>& create) {
  GPUWERK_ASSIGN_OR_RETURN(const std::string key, IdempotencyKeys::KeyOf(call.req));
  if (key.empty()) return create(RecordAnswer());
  const std::string& person_id = call.who.person_id;
  const std::string hash = IdempotencyKeys::RequestHash(call.req);
  GPUWERK_ASSIGN_OR_RETURN(auto stored, ctx.idempotency.Replay(person_id, key, hash));
  if (stored) return std::move(*stored);
  auto created = create([&](store::Transaction& tx, int status, const nlohmann::json& body) {
    return ctx.idempotency.Record(tx, person_id, key, hash, status, body.dump());
  });
  if (created) return created;
  // A concurrent request with the same key committed first: this one failed on its record, or on
  // what the first one created (the name, the host). Answer the first's.
  GPUWERK_ASSIGN_OR_RETURN(auto first, ctx.idempotency.Replay(person_id, key, hash));
  if (first) return std::move(*first);
  return created;
}

}  // namespace gpuwerk::api
