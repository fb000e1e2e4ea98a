// GET /api/v1/events (issue 5): a person's instance and queue changes as server-sent events, so
// that clients do not poll. The streams themselves are EventHub's (event_hub.h, docs/api.md
// "Events").
#include "api/api_context.h"
#include "api/event_hub.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "sched/person_events.h"

namespace gpuwerk::api {

EventHub::Reader PersonEventReader(sched::PersonStateReader& state, const SshCommandFormat& ssh) {
  return [&state, &ssh](const std::string& person_id,
                        const std::vector<std::pair<std::string, std::string>>& known)
             -> core::Result<PersonItems> {
    std::vector<std::string> instance_ids, entry_ids;
    for (const auto& [kind, id] : known) {
      (kind == "instance" ? instance_ids : entry_ids).push_back(id);
    }
    GPUWERK_ASSIGN_OR_RETURN(sched::PersonState now,
                             state.Read(person_id, instance_ids, entry_ids));
    PersonItems items;
    for (const auto& in : now.instances) {
      items.live.push_back({"instance", in.id, InstanceJson(in, ssh)});
    }
    for (const auto& e : now.queue_entries) {
      items.live.push_back({"queue_entry", e.id, QueueEntryJson(e)});
    }
    for (const auto& in : now.ended_instances) {
      items.ended.push_back({"instance", in.id, InstanceJson(in, ssh)});
    }
    for (const auto& e : now.left_entries) {
      items.ended.push_back({"queue_entry", e.id, QueueEntryJson(e)});
    }
    return items;
  };
}

namespace handlers {

Answer OpenEventStream(ApiContext& ctx, Call& call) {
  if (ctx.events == nullptr) return core::NotFound("event stream");
  // The stream outlives this request: its credentials are checked again now and then, so that
  // signing out (or a deleted token, an expired sign-in) ends it.
  Request credentials;
  credentials.method = "GET";
  for (const auto& [name, value] : call.req.headers) {
    if (EqualsIgnoreCase(name, "Authorization") || EqualsIgnoreCase(name, "Cookie")) {
      credentials.headers.emplace_back(name, value);
    }
  }
  auto still_allowed = [&ctx, credentials = std::move(credentials),
                        person_id = call.who.person_id] {
    auto now = ctx.authn.Authenticate(credentials);
    if (now) return now->person_id == person_id;
    // A store that is busy or away is no answer: ask again next time.
    return now.error().code != core::ErrorCode::kUnauthenticated;
  };
  GPUWERK_ASSIGN_OR_RETURN(
      auto producer,
      ctx.events->Open(call.who.person_id, call.who.email_proven, std::move(still_allowed)));
  Response r;
  r.SetHeader("Content-Type", "text/event-stream");  // always UTF-8 (WHATWG HTML §9.2)
  r.stream = std::move(producer);
  return r;
}

}  // namespace handlers
}  // namespace gpuwerk::api
