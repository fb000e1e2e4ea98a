#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "api/api_context.h"
#include "api/http_types.h"
#include "auth/principal.h"
#include "core/error.h"
#include "core/time_format.h"

namespace gpuwerk::api {

/// The problem JSON for `error`, with Retry-After when the error carries retry_after_seconds.
Response ErrorResponse(const core::Error& error);

/// Authenticates `req` and calls `fn(principal)`; answers the problem JSON when that fails.
template <class Fn>
Response Authenticated(ApiContext& ctx, Request& req, Fn&& fn) {
  auto who = ctx.authn.Authenticate(req);
  if (!who) return ErrorResponse(who.error());
  return std::forward<Fn>(fn)(*who);
}

/// Parses the JSON object body and calls `fn(body)`; answers invalid_json otherwise.
template <class Fn>
Response WithJsonBody(const Request& req, Fn&& fn) {
  auto body = ParseJsonObject(req);
  if (!body) return ErrorResponse(body.error());
  return std::forward<Fn>(fn)(*body);
}

/// `{"amount_minor": …}`-style helpers and shared JSON shapes.
nlohmann::json PersonJson(const auth::Person& person);
/// A queue entry as the API shows it (docs/api.md; queue_handlers.cc).
nlohmann::json QueueEntryJson(const sched::QueueEntry& entry);
/// An instance as the API shows it (docs/api.md; instance_handlers.cc).
nlohmann::json InstanceJson(const sched::Instance& instance, const SshCommandFormat& ssh);

/// The 1-based `?page=` query parameter. Errors: invalid_page.
core::Result<int> PageParam(const Request& req);

}  // namespace gpuwerk::api
