// admin relay-sessions: every relay session (SSH connection), for operators.
#include "cli/internal/relay_session_table.h"
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of `admin relay-sessions`.
struct AdminRelaySessionOptions {
  std::string instance;  ///< --instance: only this instance's (an id)
  std::string person;    ///< --person: only this person's (an id)
  int page = 1;          ///< --page
};

core::Result<void> AdminRelaySessionsVerb(VerbContext& ctx, const AdminRelaySessionOptions& opt) {
  GPUWERK_TRY(CheckPage(opt.page));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  std::string path = "/api/v1/admin/relay-sessions?page=" + std::to_string(opt.page);
  if (!opt.instance.empty()) path += "&instance_id=" + PathEscape(opt.instance);
  if (!opt.person.empty()) path += "&person_id=" + PathEscape(opt.person);
  GPUWERK_ASSIGN_OR_RETURN(json page, server.Ok("GET", path));
  PrintRelaySessions(ctx, page, opt.page, /*with_person=*/true);
  return {};
}

}  // namespace

void AddAdminRelaySessionVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminRelaySessionOptions>();
  CLI::App* cmd = verbs.AddVerb(admin, "relay-sessions",
                                "List every relay session (SSH connection), newest first", opt,
                                &AdminRelaySessionsVerb);
  cmd->add_option("--instance", opt->instance, "only this instance's (an instance id)");
  cmd->add_option("--person", opt->person, "only this person's (a person id)");
  cmd->add_option("--page", opt->page, "the page, 15 relay sessions each (default 1)");
}

}  // namespace gpuwerk::cli::internal
