#pragma once

#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "api/api_context.h"
#include "api/api_routes.h"
#include "api/http_types.h"
#include "api/json_writer.h"
#include "auth/principal.h"
#include "billing/payment_hold_table.h"
#include "core/error.h"
#include "core/time_format.h"
#include "store/database.h"

namespace gpuwerk::api {

/// The problem JSON for `error`, with Retry-After when the error carries retry_after_seconds.
/// Used by the route table only (api_routes.cc): handlers return errors.
Response ErrorResponse(const core::Error& error);

/// `{"amount_minor": …}`-style helpers and shared JSON shapes.
nlohmann::json PersonJson(const auth::Person& person);
/// A queue entry as the API shows it (docs/api.md; queue_handlers.cc).
nlohmann::json QueueEntryJson(const sched::QueueEntry& entry);
/// An instance as the API shows it (docs/api.md; instance_handlers.cc).
nlohmann::json InstanceJson(const sched::Instance& instance, const SshCommandFormat& ssh);

/// A billing account's payment hold as GET /api/v1/me (`billing.payment_hold`) and GET
/// /api/v1/billing (`payment_hold`) show it: `{invoice_id, reason, since}` (the provider's
/// invoice id, e.g. Stripe's "in_…"; "payment_failed"; RFC 3339), or null when none.
nlohmann::json PaymentHoldJson(const std::optional<billing::PaymentHold>& hold);

/// The bound the instance and queue routes read their "name" field with: none beyond the request
/// body's size limit, so that the service's own rule (sched::ValidateDnsLabel: 1 to 63 characters,
/// 400 invalid_name) answers every too-long name rather than the generic field bound.
inline constexpr size_t kInstanceNameReadLimit = std::numeric_limits<size_t>::max();

/// The 1-based `?page=` query parameter. Errors: invalid_page.
core::Result<int> PageParam(const Request& req);

/// Stores a create's answer (`status`, `body`) inside the create's own transaction `tx`, so the
/// answer commits with the change it reports. Errors: IdempotencyKeys::Record's.
using RecordAnswer = std::function<core::Result<void>(store::Transaction& tx, int status,
                                                      const nlohmann::json& body)>;

/// A creating POST under its `Idempotency-Key` header (docs/queue.md; POST /api/v1/instances and
/// /api/v1/queue-entries): the same key from the same person answers the first request's answer
/// again and creates nothing new. Without the header, `create` runs with an empty RecordAnswer.
/// With it: a stored answer is answered without running `create`; else `create` runs and must
/// call the RecordAnswer it gets inside its transaction; when `create` fails because a concurrent
/// request with the same key committed first (on its record, or on what that one created), the
/// first request's answer is answered. Errors: 400 invalid_idempotency_key, 409
/// idempotency_key_reused (the key came with another request), `create`'s.
core::Result<Response> IdempotentCreate(
    ApiContext& ctx, const Call& call,
    const std::function<core::Result<Response>(const RecordAnswer& record)>& create);

/// A list page as the API answers it (docs/api.md): `{"items": [...], "page", "pages",
/// "total"}`, each item written by `write_item(JsonWriter&, item)` straight into the body (no
/// json tree: list routes are the hot ones).
template <class Items, class WriteItem>
Response JsonPage(const Items& items, int64_t page, int64_t pages, int64_t total,
                  WriteItem&& write_item) {
  JsonWriter w;
  w.BeginObject().Key("items").BeginArray();
  for (const auto& item : items) write_item(w, item);
  w.EndArray().Member("page", page).Member("pages", pages).Member("total", total).EndObject();
  return Response::JsonText(200, w.Take());
}

}  // namespace gpuwerk::api
