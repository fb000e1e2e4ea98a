// /api/v1/queue-entries and /api/v1/usage/queue: a person's queue entries and
// queue history, each call scoped to the caller (another person's entry is not_found).
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"

namespace gpuwerk::api {

nlohmann::json QueueEntryJson(const sched::QueueEntry& e) {
  nlohmann::json j = {{"id", e.id},
                      {"gpu_type", e.gpu_type},
                      {"name", e.name},
                      {"ssh_key", {{"id", e.ssh_key_id}, {"name", e.ssh_key_name}}},
                      {"status", std::string(sched::ToString(e.status))},
                      {"position", nullptr},
                      {"entered_at", core::FormatRfc3339(e.entered_at)},
                      {"left_at", nullptr},
                      {"instance_id", nullptr},
                      {"last_failure", e.last_failure}};
  if (e.status == sched::QueueEntryStatus::kOpen) j["position"] = e.position;
  if (e.left_at) j["left_at"] = core::FormatRfc3339(*e.left_at);
  if (!e.instance_id.empty()) j["instance_id"] = e.instance_id;
  return j;
}

namespace handlers {

Answer ListQueueEntries(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto list, ctx.queue.List(call.who.person_id, page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& e : list.items) items.push_back(QueueEntryJson(e));
  return Response::Json(200, {{"items", std::move(items)},
                              {"page", list.page},
                              {"pages", list.pages},
                              {"total", list.total}});
}

Answer JoinQueue(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(auto body,
                           ParseJsonObject(call.req, {"name", "ssh_key_id", "gpu_type"}));
  GPUWERK_ASSIGN_OR_RETURN(auto name, RequireString(body, "name", kInstanceNameReadLimit, 0));
  GPUWERK_ASSIGN_OR_RETURN(auto key, RequireString(body, "ssh_key_id", 256));
  GPUWERK_ASSIGN_OR_RETURN(auto type, OptionalString(body, "gpu_type", 256));
  return IdempotentCreate(ctx, call, [&](const RecordAnswer& record) -> Answer {
    sched::QueueService::InTransaction record_entry;
    if (record) {
      record_entry = [&](store::Transaction& tx, const sched::QueueEntry& e) {
        return record(tx, 201, QueueEntryJson(e));
      };
    }
    GPUWERK_ASSIGN_OR_RETURN(
        auto entry, ctx.queue.Join(call.who.person_id, type.value_or("spark-1x"), name, key,
                                   call.req.remote_address, record_entry));
    if (ctx.events) ctx.events->Wake();  // the joiner's streams show the entry
    return Response::Json(201, QueueEntryJson(entry));
  });
}

Answer LeaveQueue(ApiContext& ctx, Call& call) {
  GPUWERK_TRY(
      ctx.queue.Leave(call.who.person_id, call.req.PathParam("id"), call.req.remote_address));
  // The leaver's streams show it cancelled; everyone behind in the queue moves up.
  if (ctx.events) ctx.events->Wake();
  return Response::NoContent();
}

Answer QueueHistory(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(auto history, ctx.queue.History(call.who.person_id, page));
  nlohmann::json items = nlohmann::json::array();
  for (const auto& h : history.items) {
    nlohmann::json j = QueueEntryJson(h.entry);
    j["wait_seconds"] = h.wait_seconds;
    j["outcome"] = h.outcome;
    j["instance"] = nullptr;
    if (h.outcome == "launched") j["instance"] = {{"id", h.entry.instance_id}};
    items.push_back(std::move(j));
  }
  return Response::Json(200, {{"items", std::move(items)},
                              {"page", history.page},
                              {"pages", history.pages},
                              {"total", history.total}});
}

}  // namespace handlers
}  // namespace gpuwerk::api
