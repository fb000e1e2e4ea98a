#include "audit/audit_log.h"

#include <algorithm>

namespace gpuwerk::audit {

core::Result<void> RecordAudit(store::Transaction& tx, core::Clock& clock, core::Rng& rng,
                               const AuditEvent& event) {
  store::Value actor =
      event.actor_id.empty() ? store::Value(store::kNull) : store::Value(event.actor_id);
  GPUWERK_TRY(
      tx.Exec("INSERT INTO audit_events (id, at, actor_id, action, target, source_address, detail) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)",
              {core::NewId(rng, "aud"), clock.NowUnix(), actor, event.action, event.target,
               event.source_address, event.detail.dump()}));
  return {};
}

core::Result<AuditPage> ListAuditEvents(store::Transaction& tx, const AuditFilter& filter,
                                        int64_t page) {
  if (page < 1) return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  // One statement per filter shape, so that each can use its index.
  auto run = [&](const std::string& where, auto... params) -> core::Result<AuditPage> {
    AuditPage out;
    out.page = page;
    GPUWERK_ASSIGN_OR_RETURN(auto count, tx.QueryOne("SELECT COUNT(*) FROM audit_events" + where,
                                                     {store::Value(params)...}));
    out.total = count ? count->Int(0) : 0;
    out.pages = std::max<int64_t>(1, (out.total + kAuditPageSize - 1) / kAuditPageSize);
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, tx.Query("SELECT id, at, actor_id, action, target, source_address, detail "
                            "FROM audit_events" +
                                where + " ORDER BY at DESC, id DESC LIMIT ? OFFSET ?",
                            {store::Value(params)..., store::Value(kAuditPageSize),
                             store::Value((page - 1) * kAuditPageSize)}));
    for (const auto& r : rows) {
      AuditRecord rec{.id = r.Text("id"),
                      .at = r.Int("at"),
                      .actor_id = r.Text("actor_id"),
                      .action = r.Text("action"),
                      .target = r.Text("target"),
                      .source_address = r.Text("source_address")};
      rec.detail = nlohmann::json::parse(r.Text("detail"), nullptr, /*allow_exceptions=*/false);
      if (rec.detail.is_discarded()) rec.detail = nlohmann::json::object();
      out.items.push_back(std::move(rec));
    }
    return out;
  };
  const bool by_actor = !filter.actor_id.empty();
  const bool by_target = !filter.target.empty();
  if (by_actor && by_target) {
    return run(" WHERE actor_id = ? AND target = ?", filter.actor_id, filter.target);
  }
  if (by_actor) return run(" WHERE actor_id = ?", filter.actor_id);
  if (by_target) return run(" WHERE target = ?", filter.target);
  return run("");
}

}  // namespace gpuwerk::audit
