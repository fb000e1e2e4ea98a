// admin gpu-types ls|set: the operator's GPU types.
#include <cctype>
#include <optional>

#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

/// The options of `admin gpu-types set`: only those given are changed.
struct AdminGpuTypeOptions {
  std::string name;
  std::optional<int64_t> price_minor;
  std::optional<int64_t> hosts_per_instance;
  std::optional<std::string> description;
  std::optional<std::string> currency;
};

core::Result<void> AdminGpuTypesLsVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/admin/gpu-types"));
  if (PrintJsonIfAsked(ctx, items)) return {};
  Table table({"NAME", "HOSTS/INSTANCE", "PRICE/H", "HOSTS", "PAIRS", "ONLINE", "FREE", "QUEUED",
               "DESCRIPTION"});
  for (const auto& t : items) {
    table.AddRow({CellText(Field(t, "name")), CellText(Field(t, "hosts_per_instance")),
                  SafeText(MoneyText(Field(t, "price"))), CellText(Field(t, "hosts")),
                  CellText(Field(t, "pairs")), CellText(Field(t, "online")),
                  CellText(Field(t, "free_capacity")), CellText(Field(t, "queued")),
                  CellText(Field(t, "description"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> AdminGpuTypesSetVerb(VerbContext& ctx, const AdminGpuTypeOptions& opt) {
  json body = json::object();
  if (opt.price_minor) body["price_minor_per_hour"] = *opt.price_minor;
  if (opt.hosts_per_instance) body["hosts_per_instance"] = *opt.hosts_per_instance;
  if (opt.description) body["description"] = *opt.description;
  if (opt.currency) {
    // ISO 4217 codes are written either way by people ("EUR"); the API takes lowercase.
    std::string currency = *opt.currency;
    for (char& c : currency) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    body["currency"] = currency;
  }
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  auto answer = server.Ok("PUT", "/api/v1/admin/gpu-types/" + PathEscape(opt.name), &body);
  if (!answer) {
    return core::Fail(InFlagWords(answer.error(), {{"price_minor_per_hour", "--price-minor"},
                                                   {"hosts_per_instance", "--hosts-per-instance"},
                                                   {"currency", "--currency"},
                                                   {"description", "--description"}}));
  }
  json type = std::move(*answer);
  if (PrintJsonIfAsked(ctx, type)) return {};
  Print(ctx, "GPU type " + SafeText(Str(type, "name")) + ": " +
                 CellText(Field(type, "hosts_per_instance")) + " host(s) per instance, " +
                 SafeText(MoneyText(Field(type, "price"))) +
                 " per hour (new billing sessions from now on).\n");
  return {};
}

}  // namespace

void AddAdminGpuTypeVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminGpuTypeOptions>();
  CLI::App* types = VerbRegistry::AddGroup(admin, "gpu-types", "Manage GPU types");
  verbs.AddVerb(*types, "ls", "List GPU types with hosts and capacity", &AdminGpuTypesLsVerb)
      ->alias("list");
  CLI::App* set =
      verbs.AddVerb(*types, "set", "Create a GPU type or change it (only the options given change)",
                    opt, &AdminGpuTypesSetVerb);
  set->add_option("NAME", opt->name, "the type's name (a DNS label)")
      ->required()
      ->check(NamedArgument());
  set->add_option("--price-minor", opt->price_minor,
                  "price per hour in minor units (cents); new billing sessions only");
  set->add_option("--hosts-per-instance", opt->hosts_per_instance,
                  "1, or 2 for a linked pair (not while the type has hosts, instances or queue "
                  "entries)");
  set->add_option("--description", opt->description, "one line shown to people");
  set->add_option("--currency", opt->currency, "an ISO 4217 code, e.g. usd or EUR (default usd)");
}

}  // namespace gpuwerk::cli::internal
