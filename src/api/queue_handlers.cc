// /api/v1/queue-entries and /api/v1/usage/queue: a person's queue entries and
// queue history, each call scoped to the caller (another person's entry is not_found).
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/idempotency.h"
#include "api/router.h"

namespace gpuwerk::api {

nlohmann::json QueueEntryJson(const sched::QueueEntry& e) {
  nlohmann::json j = {{"id", e.id},
                      {"gpu_type", e.gpu_type},
                      {"name", e.name},
                      {"ssh_key", {{"id", e.ssh_key_id}, {"name", e.ssh_key_name}}},
                      {"status", e.status},
                      {"position", nullptr},
                      {"entered_at", core::FormatRfc3339(e.entered_at)},
                      {"left_at", nullptr},
                      {"instance_id", nullptr},
                      {"last_failure", e.last_failure}};
  if (e.status == "open") j["position"] = e.position;
  if (e.left_at) j["left_at"] = core::FormatRfc3339(*e.left_at);
  if (!e.instance_id.empty()) j["instance_id"] = e.instance_id;
  return j;
}

namespace {

nlohmann::json EntryJson(const sched::QueueEntry& e) { return QueueEntryJson(e); }

}  // namespace

void RegisterQueueRoutes(Router& router, ApiContext& ctx) {
  router.Add("GET", "/api/v1/queue-entries", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto list = ctx.queue.List(who.person_id);
      if (!list) return ErrorResponse(list.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& e : *list) items.push_back(EntryJson(e));
      const int64_t total = static_cast<int64_t>(items.size());
      return Response::Json(
          200, {{"items", std::move(items)}, {"page", 1}, {"pages", 1}, {"total", total}});
    });
  });
  router.Add("POST", "/api/v1/queue-entries", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      return WithJsonBody(req, [&](const nlohmann::json& body) {
        auto name = RequireString(body, "name", 256, 0);
        if (!name) return ErrorResponse(name.error());
        auto key = RequireString(body, "ssh_key_id", 256);
        if (!key) return ErrorResponse(key.error());
        auto type = OptionalString(body, "gpu_type", 256);
        if (!type) return ErrorResponse(type.error());
        auto idem = IdempotencyKeys::KeyOf(req);
        if (!idem) return ErrorResponse(idem.error());
        const std::string hash = IdempotencyKeys::RequestHash(req);
        if (!idem->empty()) {
          auto replay = ctx.idempotency.Replay(who.person_id, *idem, hash);
          if (!replay) return ErrorResponse(replay.error());
          if (*replay) return std::move(**replay);
        }
        sched::QueueService::InTransaction record;
        if (!idem->empty()) {
          record = [&](store::Transaction& tx, const sched::QueueEntry& e) {
            return ctx.idempotency.Record(tx, who.person_id, *idem, hash, 201, EntryJson(e).dump());
          };
        }
        auto entry = ctx.queue.Join(who.person_id, type->value_or("spark-1x"), *name, *key,
                                    req.remote_address, record);
        // A concurrent request with the same key committed first: this one failed on its
        // record, or on what the first one created (the name, the host). Answer the first's.
        if (!entry && !idem->empty()) {
          auto replay = ctx.idempotency.Replay(who.person_id, *idem, hash);
          if (!replay) return ErrorResponse(replay.error());
          if (*replay) return std::move(**replay);
        }
        if (!entry) return ErrorResponse(entry.error());
        if (ctx.events) ctx.events->Wake();  // the joiner's streams show the entry
        return Response::Json(201, EntryJson(*entry));
      });
    });
  });
  router.Add("DELETE", "/api/v1/queue-entries/{id}", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto left = ctx.queue.Leave(who.person_id, req.PathParam("id"), req.remote_address);
      if (!left) return ErrorResponse(left.error());
      // The leaver's streams show it cancelled; everyone behind in the queue moves up.
      if (ctx.events) ctx.events->Wake();
      return Response::NoContent();
    });
  });
  router.Add("GET", "/api/v1/usage/queue", [&ctx](Request& req) {
    return Authenticated(ctx, req, [&](const auth::Principal& who) {
      auto page = PageParam(req);
      if (!page) return ErrorResponse(page.error());
      auto history = ctx.queue.History(who.person_id, *page);
      if (!history) return ErrorResponse(history.error());
      nlohmann::json items = nlohmann::json::array();
      for (const auto& h : history->items) {
        nlohmann::json j = EntryJson(h.entry);
        j["wait_seconds"] = h.wait_seconds;
        j["outcome"] = h.outcome;
        j["instance"] = nullptr;
        if (h.outcome == "launched") j["instance"] = {{"id", h.entry.instance_id}};
        items.push_back(std::move(j));
      }
      return Response::Json(200, {{"items", std::move(items)},
                                  {"page", history->page},
                                  {"pages", history->pages},
                                  {"total", history->total}});
    });
  });
}

}  // namespace gpuwerk::api
