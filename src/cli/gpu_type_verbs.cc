// gpu-types: the GPU types people can create instances of, with prices and capacity.
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

core::Result<void> GpuTypesVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json types, server.Ok("GET", "/api/v1/gpu-types"));
  const json& items = Field(types, "items");
  if (PrintJsonIfAsked(ctx, items)) return {};
  Table table({"NAME", "HOSTS", "PRICE/H", "FREE", "ONLINE", "QUEUED", "DESCRIPTION"});
  for (const auto& t : items) {
    table.AddRow({CellText(Field(t, "name")), CellText(Field(t, "hosts_per_instance")),
                  SafeText(MoneyText(Field(t, "price"))), CellText(Field(t, "free_capacity")),
                  CellText(Field(t, "online")), CellText(Field(t, "queued")),
                  CellText(Field(t, "description"))});
  }
  Print(ctx, table.Render());
  return {};
}

}  // namespace

void AddGpuTypeVerbs(CLI::App& app, const VerbRegistry& verbs) {
  verbs.AddVerb(app, "gpu-types", "List GPU types, prices and capacity", &GpuTypesVerb);
}

}  // namespace gpuwerk::cli::internal
