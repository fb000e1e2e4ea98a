// /api/v1/admin/audit: the audit log for operators (R-17; docs/api.md "Audit"), newest first, 15
// events a page, filtered by actor and target.
#include "api/api_context.h"
#include "api/handler_support.h"
#include "api/internal/handlers.h"
#include "audit/audit_log.h"
#include "auth/email_address.h"
#include "auth/person_table.h"
#include "protocol/page.h"

namespace gpuwerk::api::handlers {
namespace {

/// The query parameter `name` ("" when absent). Errors: invalid_query above 320 characters.
core::Result<std::string> QueryText(const Request& req, const char* name) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return std::string();
  if (it->second.size() > 320) {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                                  std::string(name) + " is too long.")
                          .WithDetail("parameter", name));
  }
  return it->second;
}

}  // namespace

Answer AdminListAudit(ApiContext& ctx, Call& call) {
  GPUWERK_ASSIGN_OR_RETURN(int page, PageParam(call.req));
  GPUWERK_ASSIGN_OR_RETURN(std::string actor, QueryText(call.req, "actor"));
  GPUWERK_ASSIGN_OR_RETURN(std::string target, QueryText(call.req, "target"));
  GPUWERK_ASSIGN_OR_RETURN(
      protocol::Page out, ctx.db.Read([&](store::Transaction& tx) -> core::Result<protocol::Page> {
        audit::AuditFilter filter{.actor_id = actor, .target = target};
        // An actor given as an email address names that person (an operator types addresses).
        if (actor.find('@') != std::string::npos) {
          auto address = auth::ParseEmailAddress(actor);
          if (!address) {
            return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_query",
                                          "actor must be a person id or an email address.")
                                  .WithDetail("parameter", "actor"));
          }
          GPUWERK_ASSIGN_OR_RETURN(auto person,
                                   auth::PersonTable::FindByEmail(tx, address->normalised));
          if (!person)
            return protocol::Page{
                .items = nlohmann::json::array(), .page = page, .pages = 1, .total = 0};
          filter.actor_id = person->person.id;
        }
        GPUWERK_ASSIGN_OR_RETURN(auto events, audit::ListAuditEvents(tx, filter, page));
        protocol::Page p{.page = events.page, .pages = events.pages, .total = events.total};
        for (const auto& e : events.items) {
          std::string actor_email;
          if (!e.actor_id.empty()) {
            GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, e.actor_id));
            actor_email = email.value_or("");
          }
          p.items.push_back({{"id", e.id},
                             {"at", core::FormatRfc3339(e.at)},
                             {"actor_id", e.actor_id},
                             {"actor_email", actor_email},
                             {"action", e.action},
                             {"target", e.target},
                             {"source_address", e.source_address},
                             {"detail", e.detail}});
        }
        return p;
      }));
  return Response::Json(200, protocol::ToJson(out));
}

}  // namespace gpuwerk::api::handlers
