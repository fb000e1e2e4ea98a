// queue join|ls|leave: waiting in a GPU type's queue for a free host (docs/queue.md).
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The options of the queue verbs.
struct QueueOptions {
  std::string name;                   ///< join: the instance's name; leave: the entry's id or name
  std::string key;                    ///< join: the SSH key's name (or id)
  std::string gpu_type = "spark-1x";  ///< join
};

/// Joining needs no card, but a launch does: without one on file the entry is
/// passed over when its turn comes (it keeps its place). Says so on stderr; says nothing when
/// /api/v1/me cannot be read (the entry is made either way).
void WarnIfNoCard(VerbContext& ctx, ServerConnection& server) {
  auto me = server.Ok("GET", "/api/v1/me");
  if (!me) return;
  const json& billing = Field(*me, "billing");
  if (!billing.is_object() || Field(billing, "payment_method_on_file") != json(false)) return;
  const json& account = Field(billing, "account");
  const bool team = Str(account, "kind") == "team";
  std::string how = "add one with 'gpuwerk billing add-card'";
  if (team && Str(*me, "role") != "owner") {
    how = "ask an owner of " + Str(account, "name") + " to add the team's card";
  } else if (Str(billing, "provider") == "manual") {
    how = "ask your operator to record one";
  }
  Warn(ctx, std::string("no payment method is on file") + (team ? " for your team" : "") +
                ": when your turn comes this entry is passed over (it keeps its place) until "
                "one is; " +
                how + ".");
}

core::Result<void> QueueJoinVerb(VerbContext& ctx, const QueueOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(std::string key_id, ResolveKeyId(server, opt.key));
  const json body = {{"name", opt.name}, {"ssh_key_id", key_id}, {"gpu_type", opt.gpu_type}};
  GPUWERK_ASSIGN_OR_RETURN(json entry, server.Ok("POST", "/api/v1/queue-entries", &body));
  if (PrintJsonIfAsked(ctx, entry)) return {};
  if (Str(entry, "status") == "launched") {
    Print(ctx, "A " + SafeText(Str(entry, "gpu_type")) + " host was free: instance " +
                   SafeText(Str(entry, "name")) + " is starting. Connect with 'gpuwerk ssh " +
                   SafeText(Str(entry, "name")) + "' once it is running.\n");
    return {};
  }
  Print(ctx, "Joined the " + SafeText(Str(entry, "gpu_type")) + " queue at position " +
                 PositionText(entry) + " (entry " + SafeText(Str(entry, "id")) + "). Instance " +
                 SafeText(Str(entry, "name")) +
                 " is launched when your turn comes, and you get a mail.\n");
  WarnIfNoCard(ctx, server);
  return {};
}

core::Result<void> QueueLsVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/queue-entries"));  // every page
  if (PrintJsonIfAsked(ctx, items)) return {};
  if (!items.is_array() || items.empty()) {
    Print(ctx,
          "You are in no queue. Join one with 'gpuwerk queue join --gpu-type TYPE NAME "
          "--key KEY'.\n");
    return {};
  }
  Table table({"ID", "GPU TYPE", "NAME", "POSITION", "ENTERED", "LAST FAILURE"});
  for (const auto& e : items) {
    table.AddRow({CellText(Field(e, "id")), CellText(Field(e, "gpu_type")),
                  CellText(Field(e, "name")), PositionText(e), CellText(Field(e, "entered_at")),
                  CellText(Field(e, "last_failure"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> QueueLeaveVerb(VerbContext& ctx, const QueueOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/queue-entries"));
  const json* found = FindItem(items, opt.name, "id", "name");
  if (found == nullptr) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no open queue entry " + opt.name + "; see 'gpuwerk queue ls'");
  }
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/queue-entries/" + PathEscape(Str(*found, "id"))));
  if (PrintJsonIfAsked(ctx, *found)) return {};
  Print(ctx, "Left the " + SafeText(Str(*found, "gpu_type")) + " queue (" +
                 SafeText(Str(*found, "name")) + ").\n");
  return {};
}

}  // namespace

void AddQueueVerbs(CLI::App& app, const VerbRegistry& verbs) {
  auto opt = std::make_shared<QueueOptions>();
  CLI::App* queue =
      VerbRegistry::AddGroup(app, "queue", "Wait in a GPU type's queue for a free host");
  CLI::App* join = verbs.AddVerb(
      *queue, "join", "Join a GPU type's queue; the instance is launched when your turn comes", opt,
      &QueueJoinVerb);
  join->add_option("NAME", opt->name, "the instance's name (a DNS label)")
      ->required()
      ->check(NamedArgument());
  join->add_option("--key", opt->key, "the name of your SSH key to put in it")->required();
  join->add_option("--gpu-type", opt->gpu_type, "the GPU type (see 'gpuwerk gpu-types')");
  verbs.AddVerb(*queue, "ls", "List your queue entries and positions", &QueueLsVerb)->alias("list");
  verbs.AddVerb(*queue, "leave", "Leave a queue (free, immediate)", opt, &QueueLeaveVerb)
      ->add_option("ENTRY", opt->name, "the entry's id or name")
      ->required()
      ->check(NamedArgument());
}

}  // namespace gpuwerk::cli::internal
