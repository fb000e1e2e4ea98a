// usage queue: the person's usage history (queue waits and outcomes); usage sessions is in
// invoice_verbs.cc.
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using nlohmann::json;

core::Result<void> UsageQueueVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/usage/queue"));
  if (PrintJsonIfAsked(ctx, items)) return {};
  if (items.empty()) {
    Print(ctx, "No queue history.\n");
    return {};
  }
  Table table({"NAME", "GPU TYPE", "ENTERED", "LEFT", "WAIT", "OUTCOME", "INSTANCE"});
  for (const auto& h : items) {
    table.AddRow({CellText(Field(h, "name")), CellText(Field(h, "gpu_type")),
                  CellText(Field(h, "entered_at")), CellText(Field(h, "left_at")),
                  SafeText(DurationText(Field(h, "wait_seconds"))), CellText(Field(h, "outcome")),
                  CellText(Field(Field(h, "instance"), "id"))});
  }
  Print(ctx, table.Render());
  return {};
}

}  // namespace

void AddUsageVerbs(CLI::App& app, const VerbRegistry& verbs) {
  CLI::App* usage = VerbRegistry::AddGroup(app, "usage", "Your usage history");
  verbs.AddVerb(*usage, "queue", "Your queue history: waits and outcomes", &UsageQueueVerb);
  AddUsageSessionVerbs(*usage, verbs);
}

}  // namespace gpuwerk::cli::internal
