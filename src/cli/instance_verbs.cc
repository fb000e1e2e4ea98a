// instances ls|create|show|restart|rm|relay-sessions and ssh: the person's instances.
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "cli/internal/launch_wait.h"
#include "cli/internal/relay_session_table.h"
#include "cli/internal/ssh_argv.h"
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The options of the instances verbs and ssh.
struct InstanceOptions {
  std::string name;                   ///< the instance's name (or id)
  std::string key;                    ///< create: the SSH key's name (or id)
  std::string gpu_type = "spark-1x";  ///< create
  std::vector<std::string> args;      ///< ssh: passed on to ssh
  int page = 1;                       ///< relay-sessions --page
  bool wait = false;                  ///< create, restart: --wait until it runs
  int64_t wait_timeout_s = 600;       ///< --wait-timeout
};

/// With --wait: follows the launch of `in` until it runs (WaitUntilRunning), then says so.
core::Result<void> WaitAndSay(VerbContext& ctx, const InstanceOptions& opt,
                              const ServerConnection& server, const json& in) {
  if (opt.wait_timeout_s < 1) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_wait_timeout",
                      "--wait-timeout must be a whole number of seconds from 1");
  }
  GPUWERK_ASSIGN_OR_RETURN(
      json running,
      WaitUntilRunning(ctx, server, in, {.timeout = std::chrono::seconds(opt.wait_timeout_s)}));
  if (PrintJsonIfAsked(ctx, running)) return {};
  Print(ctx, "Instance " + SafeText(Str(running, "name")) +
                 " is running. Connect with 'gpuwerk ssh " + SafeText(Str(running, "name")) +
                 "'.\n");
  return {};
}

/// The instance as `instances show` prints it for people.
void PrintInstance(VerbContext& ctx, const json& in) {
  std::string out = "name:        " + SafeText(Str(in, "name")) + "\n" +
                    "id:          " + SafeText(Str(in, "id")) + "\n" +
                    "status:      " + SafeText(Str(in, "status"));
  if (!Str(in, "status_reason").empty()) out += " (" + SafeText(Str(in, "status_reason")) + ")";
  out += "\nhostname:    " + SafeText(Str(in, "hostname")) + "\n";
  out += "gpu type:    " + SafeText(Str(in, "gpu_type"));
  if (!Str(in, "gpu").empty()) out += " (" + SafeText(Str(in, "gpu")) + ")";
  out += "\nssh key:     " + SafeText(Str(Field(in, "ssh_key"), "name")) + "\n";
  std::string hosts;
  for (const auto& h : Field(in, "hosts")) {
    if (h.is_string()) hosts += (hosts.empty() ? "" : ", ") + SafeText(h.get<std::string>());
  }
  out += "hosts:       " + hosts + "\n";
  out += "ssh:         " +
         (Str(in, "ssh_command").empty() ? std::string("(not ready yet)")
                                         : SafeText(Str(in, "ssh_command"))) +
         "\n";
  out += "billing:     " + SafeText(Str(Field(in, "billing_session"), "id")) + " since " +
         SafeText(Str(Field(in, "billing_session"), "started_at")) + "\n";
  Print(ctx, out);
}

core::Result<void> InstancesLsVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/instances"));
  if (PrintJsonIfAsked(ctx, items)) return {};
  if (items.empty()) {
    Print(ctx, "No instances. Create one with 'gpuwerk instances create NAME --key KEY'.\n");
    return {};
  }
  Table table({"NAME", "STATUS", "GPU TYPE", "HOSTNAME", "CREATED"});
  for (const auto& in : items) {
    table.AddRow({CellText(Field(in, "name")), CellText(Field(in, "status")),
                  CellText(Field(in, "gpu_type")), CellText(Field(in, "hostname")),
                  CellText(Field(in, "created_at"))});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> InstancesCreateVerb(VerbContext& ctx, const InstanceOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(std::string key_id, ResolveKeyId(server, opt.key));
  const json body = {{"name", opt.name}, {"ssh_key_id", key_id}, {"gpu_type", opt.gpu_type}};
  auto created = server.Ok("POST", "/api/v1/instances", &body);
  if (!created && created.error().api_code == "no_capacity") {
    core::Error e = created.error();
    e.message = "no " + opt.gpu_type + " host is free right now; wait in the queue with " +
                "'gpuwerk queue join --gpu-type " + opt.gpu_type + " " + opt.name + " --key " +
                opt.key + "'";
    return core::Fail(std::move(e));
  }
  if (!created) return core::Fail(created.error());
  json in = std::move(*created);
  const bool queued = Field(in, "queued") == true;
  // With --wait, --json prints only the running instance, at the end.
  if (!(opt.wait && !queued) && PrintJsonIfAsked(ctx, in)) return {};
  if (queued) {
    // The type is not online: the server put the request in its queue (docs/queue.md).
    Print(ctx, "No " + SafeText(Str(in, "gpu_type")) +
                   " capacity is online: joined its queue at position " + PositionText(in) +
                   " (entry " + SafeText(Str(in, "id")) + "). Instance " +
                   SafeText(Str(in, "name")) +
                   " is launched when capacity comes, and you get a mail." +
                   (opt.wait ? " (--wait does not wait in the queue: 'gpuwerk events' shows the "
                               "launch.)"
                             : "") +
                   "\n");
    return {};
  }
  const std::string name = SafeText(Str(in, "name"));
  std::string said = "Created instance " + name + " (" + SafeText(Str(in, "hostname")) +
                     "), status " + SafeText(Str(in, "status")) + ".";
  if (opt.wait) {
    if (!ctx.common.json) Print(ctx, said + "\n");
    return WaitAndSay(ctx, opt, server, in);
  }
  // "Connect with" only once it can be connected to.
  if (Str(in, "status") == "running") {
    said += " Connect with 'gpuwerk ssh " + name + "'.";
  } else {
    said += " It is not running yet: wait for it with 'gpuwerk instances show " + name +
            "' or 'gpuwerk events' (or create with --wait).";
  }
  Print(ctx, said + "\n");
  return {};
}

core::Result<void> InstancesShowVerb(VerbContext& ctx, const InstanceOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(server, opt.name));
  GPUWERK_ASSIGN_OR_RETURN(json in,
                           server.Ok("GET", "/api/v1/instances/" + PathEscape(Str(found, "id"))));
  if (PrintJsonIfAsked(ctx, in)) return {};
  PrintInstance(ctx, in);
  return {};
}

core::Result<void> InstancesRestartVerb(VerbContext& ctx, const InstanceOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(server, opt.name));
  const json body = json::object();
  GPUWERK_ASSIGN_OR_RETURN(
      json restarting,
      server.Ok("POST", "/api/v1/instances/" + PathEscape(Str(found, "id")) + "/restart", &body));
  if (opt.wait) {
    if (!ctx.common.json) Print(ctx, "Restarting " + SafeText(Str(found, "name")) + ".\n");
    return WaitAndSay(ctx, opt, server, restarting);
  }
  if (PrintJsonIfAsked(ctx, restarting)) return {};
  Print(ctx, "Restarting " + SafeText(Str(found, "name")) + ".\n");
  return {};
}

/// `instances rm NAME`: deletes it; run again while it is being deleted (status `deleting`, or
/// a 404 from the DELETE when it went in between) it says so instead of "Deleting" again
/// (docs/api.md: a repeated DELETE is 204 while deleting, 404 once gone).
core::Result<void> InstancesRmVerb(VerbContext& ctx, const InstanceOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(server, opt.name));
  const std::string name = SafeText(Str(found, "name"));
  if (Str(found, "status") == "deleting") {
    if (PrintJsonIfAsked(ctx, found)) return {};
    Print(ctx, name + " is already being deleted; it is gone once its host has removed it.\n");
    return {};
  }
  auto deleted = server.Ok("DELETE", "/api/v1/instances/" + PathEscape(Str(found, "id")));
  if (!deleted && deleted.error().code == core::ErrorCode::kNotFound) {
    found["status"] = "deleted";
    if (PrintJsonIfAsked(ctx, found)) return {};
    Print(ctx, name + " is already deleted.\n");
    return {};
  }
  if (!deleted) return std::unexpected(std::move(deleted).error());
  if (PrintJsonIfAsked(ctx, found)) return {};
  Print(ctx, "Deleting " + name + "; its billing session has ended.\n");
  return {};
}

core::Result<void> SshVerb(VerbContext& ctx, const InstanceOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json found, FindInstance(server, opt.name));
  GPUWERK_ASSIGN_OR_RETURN(json in,
                           server.Ok("GET", "/api/v1/instances/" + PathEscape(Str(found, "id"))));
  GPUWERK_ASSIGN_OR_RETURN(std::vector<std::string> words, SshArgv(in, opt.name, opt.args));
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ctx.io.out->flush();
  ctx.io.err->flush();
  ::execvp("ssh", argv.data());
  return core::Fail(ErrorCode::kUnavailable, "ssh_not_found",
                    std::string("cannot run ssh: ") + std::strerror(errno));
}

core::Result<void> InstancesRelaySessionsVerb(VerbContext& ctx, const InstanceOptions& opt) {
  GPUWERK_TRY(CheckPage(opt.page));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  // A live instance by name or id; else the argument as an id (a deleted instance's history).
  std::string id = opt.name;
  auto found = FindInstance(server, opt.name);
  if (found) {
    id = Str(*found, "id");
  } else if (found.error().api_code != "not_found") {
    return core::Fail(found.error());
  }
  auto page = server.Ok("GET", "/api/v1/instances/" + PathEscape(id) +
                                   "/relay-sessions?page=" + std::to_string(opt.page));
  if (!page && page.error().api_code == "not_found") {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no instance named " + opt.name +
                          " (a deleted one is found by its id); see 'gpuwerk instances ls'");
  }
  if (!page) return core::Fail(page.error());
  PrintRelaySessions(ctx, *page, opt.page, /*with_person=*/false);
  return {};
}

}  // namespace

void AddInstanceVerbs(CLI::App& app, const VerbRegistry& verbs) {
  auto opt = std::make_shared<InstanceOptions>();
  auto add_wait_options = [opt](CLI::App* cmd) {
    cmd->add_flag("--wait", opt->wait,
                  "wait until the instance is running, printing the launch's steps");
    cmd->add_option("--wait-timeout", opt->wait_timeout_s,
                    "with --wait: give up after this many seconds (default 600)");
  };
  CLI::App* instances = VerbRegistry::AddGroup(app, "instances", "Manage your instances");
  verbs.AddVerb(*instances, "ls", "List your instances", &InstancesLsVerb)->alias("list");
  CLI::App* create =
      verbs.AddVerb(*instances, "create", "Create an instance", opt, &InstancesCreateVerb);
  create->add_option("NAME", opt->name, "a DNS label, unique among your instances")
      ->required()
      ->check(NamedArgument());
  create->add_option("--key", opt->key, "the name of your SSH key to put in it")->required();
  create->add_option("--gpu-type", opt->gpu_type, "the GPU type (see 'gpuwerk gpu-types')");
  add_wait_options(create);
  verbs.AddVerb(*instances, "show", "Show one instance", opt, &InstancesShowVerb)
      ->add_option("NAME", opt->name, "the instance's name")
      ->required()
      ->check(NamedArgument());
  CLI::App* restart = verbs.AddVerb(*instances, "restart", "Restart an instance's container", opt,
                                    &InstancesRestartVerb);
  restart->add_option("NAME", opt->name, "the instance's name")->required()->check(NamedArgument());
  add_wait_options(restart);
  verbs.AddVerb(*instances, "rm", "Delete an instance", opt, &InstancesRmVerb)
      ->alias("remove")
      ->alias("delete")
      ->add_option("NAME", opt->name, "the instance's name")
      ->required()
      ->check(NamedArgument());
  CLI::App* relay_sessions =
      verbs.AddVerb(*instances, "relay-sessions",
                    "List an instance's relay sessions (SSH connections), newest first", opt,
                    &InstancesRelaySessionsVerb);
  relay_sessions->add_option("NAME", opt->name, "the instance's name, or the id of a deleted one")
      ->required()
      ->check(NamedArgument());
  relay_sessions->add_option("--page", opt->page, "the page, 15 relay sessions each (default 1)");

  CLI::App* ssh = verbs.AddVerb(app, "ssh", "Log in to an instance over SSH (runs the system ssh)",
                                opt, &SshVerb);
  ssh->add_option("NAME", opt->name, "the instance's name")->required()->check(NamedArgument());
  ssh->add_option("ARGS", opt->args, "arguments passed on to ssh (after --)");
}

}  // namespace gpuwerk::cli::internal
