// admin instances | queue | people: the operator's views of everyone (docs/api.md "Operators:
// people, instances, queues"), and the operator flag.
#include <algorithm>
#include <cctype>

#include "cli/internal/relay_session_table.h"
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of the admin instances, queue and people verbs.
struct AdminViewOptions {
  std::string before;    ///< instances, people: a page's `next` cursor (older rows)
  std::string after;     ///< instances, people: a page's `prev` cursor (newer rows)
  std::string status;    ///< instances: only this status
  std::string host;      ///< instances: only those on this host
  bool deleted = false;  ///< instances: deleted ones too
  std::string gpu_type;  ///< queue: only this GPU type's
  int page = 1;          ///< queue: the page
  std::string email;     ///< set-operator, clear-operator: whose flag
};

/// `path` with the cursor options appended (after `sep`, '?' or '&'). Errors: invalid_cursor for
/// a cursor with characters no cursor has.
core::Result<std::string> WithCursor(std::string path, char sep, const AdminViewOptions& opt) {
  for (const std::string* c : {&opt.before, &opt.after}) {
    if (!std::all_of(c->begin(), c->end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_';
        })) {
      return core::InvalidArgument(
          "invalid_cursor",
          "Pass --before or --after the cursor a page printed, exactly as it was printed.");
    }
  }
  if (!opt.before.empty()) {
    path += sep + std::string("before=") + opt.before;
    sep = '&';
  }
  if (!opt.after.empty()) path += sep + std::string("after=") + opt.after;
  return path;
}

/// "Page N of M." and the commands for the older and newer pages of `verb`.
std::string KeysetFooter(const json& page, const std::string& verb) {
  std::string footer = "Page " + CellText(Field(page, "page")) + " of " +
                       CellText(Field(page, "pages")) + ", " + CellText(Field(page, "total")) +
                       " in all, newest first.";
  if (!Str(page, "next").empty()) {
    footer += " Older: gpuwerk " + verb + " --before " + SafeText(Str(page, "next"));
  }
  if (!Str(page, "prev").empty()) {
    footer += " Newer: gpuwerk " + verb + " --after " + SafeText(Str(page, "prev"));
  }
  return footer + "\n";
}

core::Result<void> AdminInstancesVerb(VerbContext& ctx, const AdminViewOptions& opt) {
  std::string path = "/api/v1/admin/instances";
  char sep = '?';
  for (auto [name, value] : {std::pair{"status", &opt.status}, {"host", &opt.host}}) {
    if (value->empty()) continue;
    path += sep + std::string(name) + "=" + PathEscape(*value);
    sep = '&';
  }
  if (opt.deleted) {
    path += sep + std::string("deleted=true");
    sep = '&';
  }
  GPUWERK_ASSIGN_OR_RETURN(path, WithCursor(path, sep, opt));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json page, server.Ok("GET", path));
  if (PrintJsonIfAsked(ctx, page)) return {};
  const json& items = Field(page, "items");
  if (!items.is_array() || items.empty()) {
    Print(ctx, "No instances.\n");
    return {};
  }
  Table table({"ID", "NAME", "OWNER", "TEAM", "GPU TYPE", "HOSTS", "DESIRED", "STATUS", "CREATED"});
  for (const auto& i : items) {
    std::string hosts;
    if (Field(i, "hosts").is_array()) {
      for (const auto& h : Field(i, "hosts")) hosts += (hosts.empty() ? "" : ",") + CellText(h);
    }
    const json& team = Field(i, "team");
    table.AddRow({CellText(Field(i, "id")), CellText(Field(i, "name")),
                  CellText(Field(Field(i, "owner"), "email")),
                  team.is_object() ? CellText(Field(team, "name")) : std::string("-"),
                  CellText(Field(i, "gpu_type")), hosts.empty() ? std::string("-") : hosts,
                  CellText(Field(i, "desired")), CellText(Field(i, "status")),
                  CellText(Field(i, "created_at"))});
  }
  Print(ctx, table.Render() + KeysetFooter(page, "admin instances"));
  return {};
}

core::Result<void> AdminQueueVerb(VerbContext& ctx, const AdminViewOptions& opt) {
  GPUWERK_TRY(CheckPage(opt.page));
  std::string path = "/api/v1/admin/queue?page=" + std::to_string(opt.page);
  if (!opt.gpu_type.empty()) path += "&gpu_type=" + PathEscape(opt.gpu_type);
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json page, server.Ok("GET", path));
  if (PrintJsonIfAsked(ctx, page)) return {};
  const json& items = Field(page, "items");
  if (!items.is_array() || items.empty()) {
    Print(ctx, "Nobody is waiting.\n");
    return {};
  }
  Table table({"GPU TYPE", "POSITION", "NAME", "OWNER", "WAITING SINCE", "ID", "LAST FAILURE"});
  for (const auto& e : items) {
    table.AddRow({CellText(Field(e, "gpu_type")), CellText(Field(e, "position")),
                  CellText(Field(e, "name")), CellText(Field(Field(e, "owner"), "email")),
                  CellText(Field(e, "entered_at")), CellText(Field(e, "id")),
                  CellText(Field(e, "last_failure"))});
  }
  std::string out = table.Render() + "Page " + std::to_string(opt.page) + " of " +
                    CellText(Field(page, "pages")) + ", " + CellText(Field(page, "total")) +
                    " waiting";
  const json& pages = Field(page, "pages");
  if (pages.is_number_integer() && opt.page < pages.get<int64_t>()) {
    out += "; next: --page " + std::to_string(opt.page + 1);
  }
  Print(ctx, out + ".\n");
  return {};
}

core::Result<void> AdminPeopleVerb(VerbContext& ctx, const AdminViewOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(std::string path, WithCursor("/api/v1/admin/people", '?', opt));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json page, server.Ok("GET", path));
  if (PrintJsonIfAsked(ctx, page)) return {};
  const json& items = Field(page, "items");
  if (!items.is_array() || items.empty()) {
    Print(ctx, "No people.\n");
    return {};
  }
  Table table({"EMAIL", "OPERATOR", "PROVEN", "TEAM", "CREATED", "ID"});
  for (const auto& p : items) {
    const json& team = Field(p, "team");
    table.AddRow({CellText(Field(p, "email")), Field(p, "is_operator") == true ? "yes" : "no",
                  Field(p, "email_proven") == true ? "yes" : "no",
                  team.is_object()
                      ? CellText(Field(team, "name")) + " (" + CellText(Field(team, "role")) + ")"
                      : std::string("-"),
                  CellText(Field(p, "created_at")), CellText(Field(p, "id"))});
  }
  Print(ctx, table.Render() + KeysetFooter(page, "admin people"));
  return {};
}

core::Result<void> SetOperator(VerbContext& ctx, const AdminViewOptions& opt, bool on) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(
      json person, server.Ok(on ? "PUT" : "DELETE",
                             "/api/v1/admin/people/" + PathEscape(opt.email) + "/operator"));
  if (PrintJsonIfAsked(ctx, person)) return {};
  Print(ctx, SafeText(Str(person, "email")) +
                 (on ? " is an operator now.\n" : " is no longer an operator.\n"));
  return {};
}

core::Result<void> AdminSetOperatorVerb(VerbContext& ctx, const AdminViewOptions& opt) {
  return SetOperator(ctx, opt, true);
}

core::Result<void> AdminClearOperatorVerb(VerbContext& ctx, const AdminViewOptions& opt) {
  return SetOperator(ctx, opt, false);
}

core::Result<void> AdminSignUpPolicyVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json policy, server.Ok("GET", "/api/v1/admin/sign-up-policy"));
  if (PrintJsonIfAsked(ctx, policy)) return {};
  std::string text = "Sign-up policy: " + SafeText(Str(policy, "policy"));
  if (Str(policy, "policy") == "domains" && Field(policy, "domains").is_array()) {
    std::string domains;
    for (const auto& d : Field(policy, "domains")) {
      domains += (domains.empty() ? "" : ", ") + SafeText(CellText(d));
    }
    text += " (" + domains + ")";
  }
  Print(ctx, text + ". It is the server's configuration (sign_up_policy, sign_up_domains).\n");
  return {};
}

}  // namespace

void AddAdminPeopleVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminViewOptions>();
  CLI::App* instances = verbs.AddVerb(admin, "instances", "List everyone's instances, newest first",
                                      opt, &AdminInstancesVerb);
  instances->add_option("--status", opt->status, "only instances with this status");
  instances->add_option("--host", opt->host, "only instances placed on this host");
  instances->add_flag("--deleted", opt->deleted, "deleted instances too");
  instances->add_option("--before", opt->before, "the page older than this cursor");
  instances->add_option("--after", opt->after, "the page newer than this cursor");

  CLI::App* queue = verbs.AddVerb(admin, "queue", "List every open queue entry, in queue order",
                                  opt, &AdminQueueVerb);
  queue->add_option("--gpu-type", opt->gpu_type, "only this GPU type's queue");
  queue->add_option("--page", opt->page, "the page, 15 entries each (default 1)");

  CLI::App* people = admin.add_subcommand("people", "Everyone's accounts (alone: list them)");
  people->require_subcommand(0, 1);
  verbs.AddTargetOptions(people);
  people->add_option("--before", opt->before, "the page older than this cursor");
  people->add_option("--after", opt->after, "the page newer than this cursor");
  verbs.OnRunAlone(people, [opt](VerbContext& ctx) { return AdminPeopleVerb(ctx, *opt); });
  verbs
      .AddVerb(*people, "set-operator", "Make a person an operator (audited)", opt,
               &AdminSetOperatorVerb)
      ->add_option("EMAIL", opt->email, "the person's email address")
      ->required()
      ->check(NamedArgument());
  verbs
      .AddVerb(*people, "clear-operator",
               "Make a person no longer an operator (audited; never the last one)", opt,
               &AdminClearOperatorVerb)
      ->add_option("EMAIL", opt->email, "the person's email address")
      ->required()
      ->check(NamedArgument());
  verbs.AddVerb(*people, "sign-up-policy", "Show who may sign up (the server's configuration)",
                &AdminSignUpPolicyVerb);
}

}  // namespace gpuwerk::cli::internal
