// admin relays add|list|revoke: the relays the server accepts, each by a relay credential of its
// own (docs/ssh.md "The relay's API credential").
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of the admin relays verbs.
struct AdminRelayOptions {
  std::string name;  ///< add, revoke: the relay's name
};

core::Result<void> AdminRelaysAddVerb(VerbContext& ctx, const AdminRelayOptions& opt) {
  const json body = {{"name", opt.name}};
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json relay, server.Ok("POST", "/api/v1/admin/relays", &body));
  if (PrintJsonIfAsked(ctx, relay)) return {};
  Print(ctx, "Registered relay " + SafeText(Str(relay, "name")) +
                 ". Its credential, shown only now:\n" + SafeText(Str(relay, "token")) +
                 "\nGive it to the relay through the environment or a file, never its command "
                 "line:\n  GPUWERK_RELAY_TOKEN=... gpuwerk relay --server URL  (or --token-file "
                 "FILE)\nIt opens the relay's routes only; its relay sessions are recorded as "
                 "relay " +
                 SafeText(Str(relay, "name")) + ".\n");
  return {};
}

core::Result<void> AdminRelaysListVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/admin/relays"));  // every page
  if (PrintJsonIfAsked(ctx, items)) return {};
  Table table({"NAME", "PREFIX", "CREATED", "CREATED BY", "LAST USED"});
  for (const auto& r : items) {
    const json& by = Field(r, "created_by");
    table.AddRow({CellText(Field(r, "name")), CellText(Field(r, "prefix")),
                  CellText(Field(r, "created_at")),
                  by.is_null() ? std::string("gpuwerk up") : CellText(by),
                  CellText(Field(r, "last_used_at"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> AdminRelaysRevokeVerb(VerbContext& ctx, const AdminRelayOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/admin/relays/" + PathEscape(opt.name)));
  if (PrintJsonIfAsked(ctx, json{{"name", opt.name}, {"revoked", true}})) return {};
  Print(ctx, "Revoked relay " + SafeText(opt.name) +
                 ": its credential no longer works, and its open relay sessions end.\n");
  return {};
}

}  // namespace

void AddAdminRelayVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminRelayOptions>();
  CLI::App* relays = VerbRegistry::AddGroup(admin, "relays", "Manage the relays' credentials");
  verbs
      .AddVerb(*relays, "add", "Register a relay (its credential is shown once)", opt,
               &AdminRelaysAddVerb)
      ->add_option("NAME", opt->name,
                   "the relay's name (a-z, 0-9, '.', '_', '-'; 'local' is gpuwerk up's own)")
      ->required();
  verbs.AddVerb(*relays, "ls", "List the registered relays", &AdminRelaysListVerb)->alias("list");
  verbs
      .AddVerb(*relays, "revoke",
               "Revoke a relay's credential (it stops working at once; its relay sessions end)",
               opt, &AdminRelaysRevokeVerb)
      ->alias("rm")
      ->add_option("NAME", opt->name, "the relay's name")
      ->required()
      ->check(NamedArgument());
}

}  // namespace gpuwerk::cli::internal
