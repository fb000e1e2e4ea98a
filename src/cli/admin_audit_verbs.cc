// admin audit: the audit log, for operators.
#include "cli/internal/relay_session_table.h"
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of `admin audit`.
struct AdminAuditOptions {
  std::string actor;   ///< --actor: a person id or email
  std::string target;  ///< --target: what was acted on (an id)
  int page = 1;        ///< --page
};

core::Result<void> AdminAuditVerb(VerbContext& ctx, const AdminAuditOptions& opt) {
  GPUWERK_TRY(CheckPage(opt.page));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  std::string path = "/api/v1/admin/audit?page=" + std::to_string(opt.page);
  if (!opt.actor.empty()) path += "&actor=" + PathEscape(opt.actor);
  if (!opt.target.empty()) path += "&target=" + PathEscape(opt.target);
  GPUWERK_ASSIGN_OR_RETURN(json page, server.Ok("GET", path));
  if (PrintJsonIfAsked(ctx, page)) return {};
  auto number = [&](const char* key, int64_t fallback) {
    const json& v = Field(page, key);
    return v.is_number_integer() ? v.get<int64_t>() : fallback;
  };
  const int64_t total = number("total", 0);
  const int64_t pages = number("pages", 1);
  const json& items = Field(page, "items");
  if (!items.is_array() || items.empty()) {
    Print(ctx, total == 0 ? "No audit events.\n"
                          : "No audit events on page " + std::to_string(opt.page) + " (" +
                                std::to_string(total) + " on " + std::to_string(pages) +
                                (pages == 1 ? " page" : " pages") + ").\n");
    return {};
  }
  Table table({"AT", "ACTOR", "ACTION", "TARGET", "FROM"});
  for (const auto& e : items) {
    std::string actor = Str(e, "actor_email");
    if (actor.empty()) actor = Str(e, "actor_id");
    if (actor.empty()) actor = "(system)";
    table.AddRow({CellText(Field(e, "at")), actor, CellText(Field(e, "action")),
                  CellText(Field(e, "target")), CellText(Field(e, "source_address"))});
  }
  std::string out = table.Render();
  out += "Page " + std::to_string(opt.page) + " of " + std::to_string(pages) + ", " +
         std::to_string(total) + " audit event" + (total == 1 ? "" : "s") + ", newest first";
  if (opt.page < pages) out += "; next: --page " + std::to_string(opt.page + 1);
  Print(ctx, out + ".\n");
  return {};
}

}  // namespace

void AddAdminAuditVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminAuditOptions>();
  CLI::App* cmd =
      verbs.AddVerb(admin, "audit", "List the audit log, newest first", opt, &AdminAuditVerb);
  cmd->add_option("--actor", opt->actor, "only what this person did (an email or person id)");
  cmd->add_option("--target", opt->target,
                  "only what was done to this: an id (a host's in 'admin hosts ls', an instance's "
                  "in 'admin instances', a team's)");
  cmd->add_option("--page", opt->page, "the page, 15 events each (default 1)");
}

}  // namespace gpuwerk::cli::internal
