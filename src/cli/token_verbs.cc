// tokens ls|create|rm: the person's API tokens.
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The options of the tokens verbs.
struct TokenOptions {
  std::string name;        ///< create: the new token's name
  std::string expires_at;  ///< create: RFC 3339 expiry, "" for none
  std::string id;          ///< rm: the token's id
};

core::Result<void> TokensLsVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json tokens, server.All("/api/v1/tokens"));
  if (PrintJsonIfAsked(ctx, tokens)) return {};
  Table table({"ID", "NAME", "PREFIX", "CREATED", "LAST USED", ""});
  for (const auto& t : tokens) {
    table.AddRow({CellText(Field(t, "id")), CellText(Field(t, "name")),
                  CellText(Field(t, "prefix")), CellText(Field(t, "created_at")),
                  CellText(Field(t, "last_used_at")),
                  IsTokenItem(t, server.target().token) ? "(this CLI)" : ""});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> TokensCreateVerb(VerbContext& ctx, const TokenOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  json body = {{"name", opt.name}};
  if (!opt.expires_at.empty()) body["expires_at"] = opt.expires_at;
  GPUWERK_ASSIGN_OR_RETURN(json created, server.Ok("POST", "/api/v1/tokens", &body));
  if (PrintJsonIfAsked(ctx, created)) return {};
  // The notes go to stderr and the secret alone to stdout, so `$(gpuwerk tokens create x)`
  // captures just the token.
  *ctx.io.err << "Created API token " << SafeText(Str(created, "name")) << " (id "
              << SafeText(Str(created, "id"))
              << "). This is the only time its secret is shown; store it now:\n";
  ctx.io.err->flush();
  Print(ctx, SafeText(Str(created, "token")) + "\n");
  return {};
}

core::Result<void> TokensRmVerb(VerbContext& ctx, const TokenOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json tokens, server.All("/api/v1/tokens"));
  const std::string& id = opt.id;
  const json* found = FindItem(tokens, id, "id");
  if (found == nullptr) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no API token with the id " + id + "; see 'gpuwerk tokens ls'");
  }
  const bool is_own = IsTokenItem(*found, server.target().token);
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/tokens/" + PathEscape(id)));
  if (!PrintJsonIfAsked(ctx, *found)) {
    Print(ctx, "Deleted API token " + SafeText(Str(*found, "name")) + ".\n");
  }
  if (is_own) {
    Warn(ctx, "that was the token this command used; run 'gpuwerk login' to get a new one");
  }
  return {};
}

}  // namespace

void AddTokenVerbs(CLI::App& app, const VerbRegistry& verbs) {
  auto opt = std::make_shared<TokenOptions>();
  CLI::App* tokens = VerbRegistry::AddGroup(app, "tokens", "Manage your personal API tokens");
  verbs.AddVerb(*tokens, "ls", "List your API tokens", &TokensLsVerb)->alias("list");
  CLI::App* create = verbs.AddVerb(
      *tokens, "create", "Create an API token (its secret is shown once)", opt, &TokensCreateVerb);
  create->add_option("NAME", opt->name, "a name for the token")->required()->check(NamedArgument());
  create->add_option("--expires-at", opt->expires_at,
                     "when the token stops working, RFC 3339 (e.g. 2027-01-31T00:00:00Z); "
                     "default: never");
  verbs.AddVerb(*tokens, "rm", "Delete an API token", opt, &TokensRmVerb)
      ->alias("remove")
      ->add_option("ID", opt->id, "the token's id (see 'gpuwerk tokens ls')")
      ->required()
      ->check(NamedArgument());
}

}  // namespace gpuwerk::cli::internal
