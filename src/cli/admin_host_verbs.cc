// admin hosts add|ls|set-ssh|drain|undrain|rm|link|unlink: the operator's GPU hosts and host
// pairs.
#include "cli/internal/verb_groups.h"
#include "cli/output.h"

namespace gpuwerk::cli::internal {
namespace {

using core::ErrorCode;
using nlohmann::json;

/// The options of the admin hosts verbs.
struct AdminHostOptions {
  std::string name;               ///< the host's name (unlink: or the pair's id)
  std::string gpu_type;           ///< add
  bool no_gpu = false;            ///< add
  std::string ssh_address;        ///< add, set-ssh: where the relay reaches its instances' sshd
  std::string ssh_ports;          ///< add, set-ssh: LOW-HIGH (or one port), "" for the default
  std::vector<std::string> args;  ///< link: two HOST=RAIL_ADDRESS
};

/// `--ssh-ports` as the API's `{low, high}`: `LOW-HIGH` or a single port, decimal. The range
/// itself is checked by the server (1 <= LOW <= HIGH <= 65535). Errors: invalid_ssh_ports.
core::Result<json> SshPortsArg(std::string_view arg) {
  auto number = [](std::string_view digits) -> std::optional<int64_t> {
    if (digits.empty() || digits.size() > 6) return std::nullopt;
    int64_t n = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      n = n * 10 + (c - '0');
    }
    return n;
  };
  const size_t dash = arg.find('-');
  const auto low = number(arg.substr(0, dash));
  const auto high = dash == std::string_view::npos ? low : number(arg.substr(dash + 1));
  if (!low || !high) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_ssh_ports",
                      "--ssh-ports must be LOW-HIGH (e.g. 32768-60999) or one port");
  }
  return json{{"low", *low}, {"high", *high}};
}

/// The `ssh_address` and `ssh_ports` members of a host body, as the options give them.
core::Result<void> AddSshMembers(const AdminHostOptions& opt, json& body) {
  if (!opt.ssh_address.empty()) body["ssh_address"] = opt.ssh_address;
  if (!opt.ssh_ports.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(body["ssh_ports"], SshPortsArg(opt.ssh_ports));
  }
  return {};
}

/// "10.0.0.5 ports 32768-60999", or "none registered".
std::string SshText(const json& host) {
  const json& ports = Field(host, "ssh_ports");
  if (Str(host, "ssh_address").empty() || !ports.is_object()) return "none registered";
  return Str(host, "ssh_address") + " ports " + CellText(Field(ports, "low")) + "-" +
         CellText(Field(ports, "high"));
}

core::Result<void> AdminHostsAddVerb(VerbContext& ctx, const AdminHostOptions& opt) {
  json body = {{"name", opt.name}, {"gpu_type", opt.gpu_type}, {"gpu_required", !opt.no_gpu}};
  GPUWERK_TRY(AddSshMembers(opt, body));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json host, server.Ok("POST", "/api/v1/admin/hosts", &body));
  if (PrintJsonIfAsked(ctx, host)) return {};
  Print(ctx, "Registered host " + SafeText(Str(host, "name")) + " (" +
                 SafeText(Str(host, "gpu_type")) + ", sshd " + SafeText(SshText(host)) +
                 "). Its agent token, shown only now:\n" + SafeText(Str(host, "token")) + "\n");
  if (Str(host, "ssh_address").empty()) {
    Warn(ctx,
         "no --ssh-address: the relay refuses this host's instances until 'gpuwerk admin hosts "
         "set-ssh " +
             SafeText(Str(host, "name")) + " --ssh-address ADDR' registers one");
  }
  return {};
}

core::Result<void> AdminHostsSetSshVerb(VerbContext& ctx, const AdminHostOptions& opt) {
  json body = json::object();
  GPUWERK_TRY(AddSshMembers(opt, body));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(
      json host, server.Ok("PUT", "/api/v1/admin/hosts/" + PathEscape(opt.name) + "/ssh", &body));
  if (PrintJsonIfAsked(ctx, host)) return {};
  Print(ctx, "Host " + SafeText(Str(host, "name")) + ": the relay reaches its instances' sshd at " +
                 SafeText(SshText(host)) + ".\n");
  return {};
}

core::Result<void> AdminHostsDrainVerb(VerbContext& ctx, const AdminHostOptions& opt, bool drain) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json host,
                           server.Ok("POST", "/api/v1/admin/hosts/" + PathEscape(opt.name) +
                                                 (drain ? "/drain" : "/undrain")));
  if (PrintJsonIfAsked(ctx, host)) return {};
  Print(ctx, drain ? "Drained " + SafeText(Str(host, "name")) +
                         ": it gets no new instances; those on it keep running.\n"
                   : "Undrained " + SafeText(Str(host, "name")) + ": it takes new instances.\n");
  return {};
}

core::Result<void> AdminHostsLsVerb(VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/admin/hosts"));  // every page
  if (PrintJsonIfAsked(ctx, items)) return {};
  // ID: what `admin audit --target` takes; INSTANCE: the name, then the id, of the one placed.
  Table table({"NAME", "ID", "GPU TYPE", "GPU", "DRAINED", "LAST SEEN", "INSTANCE", "PAIR", "SSHD",
               "DOCKER INSIDE", "PROBLEM"});
  for (const auto& h : items) {
    // The engine being away, else why the host is degraded (C13), else nothing.
    std::string problem = Str(h, "engine_error");
    if (problem.empty()) problem = Str(h, "degraded_reason");
    // "node 0 with b (rail 192.168.100.1, hpr_…)"; "-" when unpaired.
    const json& pair = Field(h, "pair");
    std::string pair_text = "-";
    if (pair.is_object()) {
      pair_text = "node " + CellText(Field(pair, "node_index")) + " with " + Str(pair, "partner") +
                  " (rail " + Str(pair, "rail_address") + ", " + Str(pair, "id") + ")";
    }
    // What the agent last said ("privileged": a person in an instance is root on the host);
    // "-" before its first sync or from an agent that does not say.
    std::string docker_inside = "-";
    if (const json& limits = Field(Field(h, "inventory"), "limits"); limits.is_object()) {
      if (std::string said = Str(limits, "docker_inside"); !said.empty()) docker_inside = said;
    }
    if (docker_inside == "privileged") docker_inside += " (tenant is root on host)";
    std::string instance = Str(h, "instance_id");
    if (!instance.empty() && !Str(h, "instance_name").empty()) {
      instance = Str(h, "instance_name") + " (" + instance + ")";
    }
    table.AddRow({CellText(Field(h, "name")), CellText(Field(h, "id")),
                  CellText(Field(h, "gpu_type")), CellText(Field(h, "gpu_required")),
                  CellText(Field(h, "drained")), CellText(Field(h, "last_seen_at")),
                  instance.empty() ? "-" : SafeText(instance), SafeText(pair_text),
                  SafeText(SshText(h)), SafeText(docker_inside), SafeText(problem)});
  }
  Print(ctx, table.Render());
  return {};
}

core::Result<void> AdminHostsRmVerb(VerbContext& ctx, const AdminHostOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/admin/hosts/" + PathEscape(opt.name)));
  if (PrintJsonIfAsked(ctx, json{{"name", opt.name}, {"removed", true}})) return {};
  Print(ctx, "Removed host " + SafeText(opt.name) +
                 "; its agent token no longer works (a pair it was in is unlinked).\n");
  return {};
}

/// `NAME=RAIL_IP` as a pair node of POST /api/v1/admin/host-pairs. Errors: invalid_argument.
core::Result<json> PairNodeArg(std::string_view arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == arg.size()) {
    return core::Fail(
        ErrorCode::kInvalidArgument, "invalid_argument",
        "expected HOST=RAIL_ADDRESS (e.g. spark-a=192.168.100.1), got '" + std::string(arg) + "'");
  }
  return json{{"name", std::string(arg.substr(0, eq))},
              {"rail_address", std::string(arg.substr(eq + 1))}};
}

core::Result<void> AdminHostsLinkVerb(VerbContext& ctx, const AdminHostOptions& opt) {
  if (opt.args.size() != 2) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_argument",
                      "give two hosts: gpuwerk admin hosts link A=RAIL_IP B=RAIL_IP (A is node 0)");
  }
  GPUWERK_ASSIGN_OR_RETURN(json node0, PairNodeArg(opt.args[0]));
  GPUWERK_ASSIGN_OR_RETURN(json node1, PairNodeArg(opt.args[1]));
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  const json body = {{"hosts", json::array({node0, node1})}};
  GPUWERK_ASSIGN_OR_RETURN(json pair, server.Ok("POST", "/api/v1/admin/host-pairs", &body));
  if (PrintJsonIfAsked(ctx, pair)) return {};
  std::string members;
  for (const auto& m : Field(pair, "hosts")) {
    members += (members.empty() ? "" : " and ") + Str(m, "name") + " (node " +
               CellText(Field(m, "node_index")) + ", rail " + Str(m, "rail_address") + ")";
  }
  Print(ctx, "Linked " + SafeText(members) + " as pair " + SafeText(Str(pair, "id")) + " for " +
                 SafeText(Str(pair, "gpu_type")) + ".\n");
  return {};
}

core::Result<void> AdminHostsUnlinkVerb(VerbContext& ctx, const AdminHostOptions& opt) {
  GPUWERK_ASSIGN_OR_RETURN(ServerConnection server, Connect(ctx));
  GPUWERK_ASSIGN_OR_RETURN(json pairs, server.All("/api/v1/admin/host-pairs"));
  std::string id;
  for (const auto& p : pairs) {
    if (Str(p, "id") == opt.name) id = Str(p, "id");
    for (const auto& m : Field(p, "hosts")) {
      if (Str(m, "name") == opt.name) id = Str(p, "id");
    }
  }
  if (id.empty()) {
    return core::Fail(
        ErrorCode::kNotFound, "not_found",
        "no pair " + opt.name + " and no paired host by that name; see 'gpuwerk admin hosts ls'");
  }
  GPUWERK_TRY(server.Ok("DELETE", "/api/v1/admin/host-pairs/" + PathEscape(id)));
  if (PrintJsonIfAsked(ctx, json{{"id", id}, {"unlinked", true}})) return {};
  Print(ctx, "Unlinked pair " + SafeText(id) + "; both hosts stay registered.\n");
  return {};
}

}  // namespace

void AddAdminHostVerbs(CLI::App& admin, const VerbRegistry& verbs) {
  auto opt = std::make_shared<AdminHostOptions>();
  CLI::App* hosts = VerbRegistry::AddGroup(admin, "hosts", "Manage GPU hosts");
  CLI::App* add = verbs.AddVerb(*hosts, "add", "Register a host (its agent token is shown once)",
                                opt, &AdminHostsAddVerb);
  add->add_option("NAME", opt->name, "the host's name (a DNS label)")
      ->required()
      ->check(NamedArgument());
  add->add_option("--gpu-type", opt->gpu_type, "the GPU type it serves")->required();
  add->add_flag("--no-gpu", opt->no_gpu, "the host has no GPU (instances say so)");
  add->add_option("--ssh-address", opt->ssh_address,
                  "the IP address or DNS name its agent publishes sshd ports on (--ssh-bind); "
                  "the relay connects there, never where the agent says");
  add->add_option("--ssh-ports", opt->ssh_ports,
                  "LOW-HIGH: the ports its published sshd ports may use (default 1024-65535)");
  verbs.AddVerb(*hosts, "ls", "List hosts", &AdminHostsLsVerb)->alias("list");
  CLI::App* set_ssh = verbs.AddVerb(
      *hosts, "set-ssh", "Set where the relay reaches a host's instances' sshd (audited)", opt,
      &AdminHostsSetSshVerb);
  set_ssh->add_option("NAME", opt->name, "the host's name")->required()->check(NamedArgument());
  set_ssh
      ->add_option("--ssh-address", opt->ssh_address,
                   "the IP address or DNS name its agent publishes sshd ports on")
      ->required();
  set_ssh->add_option("--ssh-ports", opt->ssh_ports,
                      "LOW-HIGH: the ports its published sshd ports may use (default 1024-65535)");
  for (const bool drain : {true, false}) {
    verbs
        .AddVerb(*hosts, drain ? "drain" : "undrain",
                 drain ? "Give a host no new instances (those on it keep running)"
                       : "Let a drained or degraded host take new instances again",
                 [opt, drain](VerbContext& ctx) { return AdminHostsDrainVerb(ctx, *opt, drain); })
        ->add_option("NAME", opt->name, "the host's name")
        ->required()
        ->check(NamedArgument());
  }
  verbs
      .AddVerb(*hosts, "rm",
               "Remove a host (refused while an instance is placed on it; unlinks its pair)", opt,
               &AdminHostsRmVerb)
      ->alias("remove")
      ->add_option("NAME", opt->name, "the host's name")
      ->required()
      ->check(NamedArgument());
  verbs
      .AddVerb(*hosts, "link",
               "Link two hosts of a 2-host GPU type into a pair: link A=RAIL_IP B=RAIL_IP", opt,
               &AdminHostsLinkVerb)
      ->add_option("HOSTS", opt->args, "two HOST=RAIL_ADDRESS; the first is node 0")
      ->required()
      ->expected(2);
  verbs
      .AddVerb(*hosts, "unlink", "Unlink a pair (refused while an instance is placed on it)", opt,
               &AdminHostsUnlinkVerb)
      ->add_option("PAIR", opt->name, "the pair's id, or the name of either host")
      ->required()
      ->check(NamedArgument());
}

}  // namespace gpuwerk::cli::internal
