#include "cli/internal/verb_support.h"

#include <algorithm>
#include <cctype>

#include "cli/output.h"
#include "core/money_text.h"
#include "core/strings.h"

namespace gpuwerk::cli::internal {

using core::ErrorCode;
using nlohmann::json;

VerbRegistry::VerbRegistry(ClientIo io, int& exit_code) : ctx_(std::make_shared<VerbContext>()) {
  ctx_->io = std::move(io);
  ctx_->exit_code = &exit_code;
}

CLI::App* VerbRegistry::AddGroup(CLI::App& parent, const std::string& name,
                                 const std::string& help) {
  CLI::App* group = parent.add_subcommand(name, help);
  group->require_subcommand(1);
  return group;
}

CLI::App* VerbRegistry::AddVerb(CLI::App& parent, const std::string& name, const std::string& help,
                                VerbFn verb) const {
  CLI::App* cmd = parent.add_subcommand(name, help);
  AddTargetOptions(cmd);
  OnRun(cmd, std::move(verb));
  return cmd;
}

void VerbRegistry::AddTargetOptions(CLI::App* cmd) const {
  cmd->add_option("--url", ctx_->common.target.url,
                  "gpuwerk server URL (overrides GPUWERK_URL and the login file)");
  cmd->add_option("--token", ctx_->common.target.token,
                  "API token (overrides GPUWERK_TOKEN and the login file)");
}

void VerbRegistry::OnRun(CLI::App* cmd, VerbFn verb) const {
  if (cmd->get_option_no_throw("--json") == nullptr) {
    cmd->add_flag("--json", ctx_->common.json, "print JSON for scripts (errors too)");
  }
  cmd->callback([ctx = ctx_, verb = std::move(verb)] { RunVerb(*ctx, verb); });
}

void VerbRegistry::OnRunAlone(CLI::App* group, VerbFn verb) const {
  if (group->get_option_no_throw("--json") == nullptr) {
    group->add_flag("--json", ctx_->common.json, "print JSON for scripts (errors too)");
  }
  group->callback([ctx = ctx_, group, verb = std::move(verb)] {
    if (group->get_subcommands().empty()) RunVerb(*ctx, verb);
  });
}

void RunVerb(VerbContext& ctx, const VerbFn& verb) {
  if (!ctx.common.target.token.empty() && !ctx.common.json) {
    // Any user of this machine reads a process's arguments (/proc/PID/cmdline, ps): --token still
    // works, with this warning first (not under --json, whose stderr is one problem line).
    *ctx.io.err << "gpuwerk: warning: --token on the command line can be read by other users of "
                   "this machine (ps, /proc); set GPUWERK_TOKEN instead, or run `gpuwerk login` "
                   "once to keep the token in the credentials file\n";
  }
  core::Result<void> result;
  try {
    result = verb(ctx);
  } catch (const std::exception& e) {
    result = core::Internal(std::string("unexpected failure: ") + e.what());
  }
  ctx.io.out->flush();
  if (result) {
    *ctx.exit_code = 0;
    return;
  }
  const core::Error& error = result.error();
  *ctx.exit_code = 1;
  if (ctx.common.json) {
    *ctx.io.err << ProblemJson(error).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    ctx.io.err->flush();
    return;
  }
  *ctx.io.err << "gpuwerk: " << SafeText(error.message) << " (" << SafeText(error.api_code)
              << ")\n";
  ctx.io.err->flush();
}

json ProblemJson(const core::Error& error) {
  json problem = {{"type", "about:blank"},
                  {"title", std::string(core::ErrorCodeName(error.code))},
                  {"code", error.api_code},
                  {"detail", error.message}};
  if (error.details.is_object()) {
    for (const auto& [key, value] : error.details.items()) {
      if (!problem.contains(key)) problem[key] = value;
    }
  }
  return problem;
}

const json& Field(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string Str(const json& obj, const char* key) {
  const json& v = Field(obj, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

void Print(VerbContext& ctx, std::string_view text) {
  *ctx.io.out << text;
  ctx.io.out->flush();
}

bool PrintJsonIfAsked(VerbContext& ctx, const json& value) {
  if (!ctx.common.json) return false;
  PrintJson(*ctx.io.out, value);
  return true;
}

void Warn(VerbContext& ctx, std::string_view text) {
  *ctx.io.err << "gpuwerk: warning: " << SafeText(text) << "\n";
  ctx.io.err->flush();
}

core::Result<std::string> ReadAll(std::istream& in, size_t limit, std::string_view what) {
  std::string data(limit + 1, '\0');
  in.read(data.data(), static_cast<std::streamsize>(limit + 1));
  if (in.bad()) {
    return core::Fail(ErrorCode::kInvalidArgument, "read_failed",
                      "cannot read " + std::string(what));
  }
  data.resize(static_cast<size_t>(in.gcount()));
  if (data.size() > limit) {
    return core::Fail(ErrorCode::kPayloadTooLarge, "input_too_large",
                      std::string(what) + " is larger than " + std::to_string(limit) + " bytes");
  }
  return data;
}

std::string PositionText(const json& entry) {
  const json& pos = Field(entry, "position");
  return pos.is_number_integer() ? std::to_string(pos.get<int64_t>()) : std::string("-");
}

// core::FormatAmount, as the server writes the `amount` fields shown elsewhere: "0.65 USD".
std::string MoneyText(const json& price) {
  const json& amount = Field(price, "amount_minor");
  if (!amount.is_number_integer()) return "";
  return core::FormatAmount(amount.get<int64_t>(), Str(price, "currency"));
}

std::string DurationText(const json& seconds) {
  if (!seconds.is_number_integer()) return "";
  const int64_t s = seconds.get<int64_t>();
  return std::to_string(s / 3600) + "h" + (s / 60 % 60 < 10 ? "0" : "") +
         std::to_string(s / 60 % 60) + "m" + (s % 60 < 10 ? "0" : "") + std::to_string(s % 60) +
         "s";
}

const json* FindItem(const json& items, std::string_view value, const char* first_key,
                     const char* second_key) {
  if (!items.is_array()) return nullptr;
  for (const char* key : {first_key, second_key}) {
    if (key == nullptr) continue;
    for (const auto& item : items) {
      if (Str(item, key) == value) return &item;
    }
  }
  return nullptr;
}

bool IsTokenItem(const json& item, std::string_view token) {
  const std::string prefix = Str(item, "prefix");
  return !prefix.empty() && token.starts_with(prefix);
}

ServerConnection::ServerConnection(Target target)
    : client_(target.url, target.token), target_(std::move(target)) {
  target_.url = client_.base_url();
}

core::Result<json> ServerConnection::Ok(std::string_view method, std::string_view path,
                                        const json* body) const {
  auto r = client_.CallOk(method, path, body);
  if (!r) return core::Fail(Explain(std::move(r).error()));
  return r;
}

core::Result<json> ServerConnection::All(std::string_view path) const {
  auto r = client_.GetAllPages(path);
  if (!r) return core::Fail(Explain(std::move(r).error()));
  return r;
}

core::Error ServerConnection::Explain(core::Error error) const {
  if (error.api_code == "unauthenticated") {
    error.message = "the server at " + target_.url +
                    " refused the API token (deleted, or mistyped?): run 'gpuwerk login' "
                    "again, or check GPUWERK_TOKEN / --token";
  }
  return error;
}

core::Result<ServerConnection> Connect(const VerbContext& ctx) {
  GPUWERK_ASSIGN_OR_RETURN(Target target, ResolveTarget(ctx.common.target, ctx.io.env));
  return ServerConnection(std::move(target));
}

core::Result<json> FindInstance(const ServerConnection& server, const std::string& name) {
  GPUWERK_ASSIGN_OR_RETURN(json items, server.All("/api/v1/instances"));
  if (const json* found = FindItem(items, name, "name", "id")) return *found;
  // A name still waiting in a queue has no instance yet: say where it stands.
  auto queued = server.All("/api/v1/queue-entries");
  if (queued) {
    if (const json* entry = FindItem(*queued, name, "name", "id")) {
      return core::Fail(ErrorCode::kNotFound, "not_found",
                        name + " is not running yet: it waits in the " + Str(*entry, "gpu_type") +
                            " queue at position " + PositionText(*entry) +
                            " and is launched when its turn comes; see 'gpuwerk queue ls'");
    }
  }
  return core::Fail(ErrorCode::kNotFound, "not_found",
                    "no instance named " + name + "; see 'gpuwerk instances ls'");
}

core::Result<std::string> ResolveKeyId(const ServerConnection& server, const std::string& key) {
  GPUWERK_ASSIGN_OR_RETURN(json keys, server.All("/api/v1/ssh-keys"));
  const json* found = FindItem(keys, key, "name", "id");
  if (found == nullptr) {
    return core::Fail(ErrorCode::kNotFound, "not_found",
                      "no key named " + key + "; see 'gpuwerk keys ls'");
  }
  return Str(*found, "id");
}

core::Error InFlagWords(
    core::Error error, std::initializer_list<std::pair<std::string_view, std::string_view>> flags) {
  auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  };
  for (const auto& [field, flag] : flags) {
    std::string& text = error.message;
    size_t at = 0;
    while ((at = text.find(field, at)) != std::string::npos) {
      const size_t end = at + field.size();
      const bool whole =
          (at == 0 || !word_char(text[at - 1])) && (end == text.size() || !word_char(text[end]));
      if (!whole) {
        at = end;
        continue;
      }
      text.replace(at, field.size(), flag);
      at += flag.size();
    }
  }
  return error;
}

core::Result<void> Confirm(VerbContext& ctx, bool yes, const std::string& question,
                           const std::string& refusal, const std::string& cancelled) {
  if (yes) return {};
  if (!ctx.io.in_is_terminal) {
    return core::Fail(ErrorCode::kFailedPrecondition, "confirmation_required", refusal);
  }
  *ctx.io.err << question;
  ctx.io.err->flush();
  std::string answer;
  if (!std::getline(*ctx.io.in, answer)) answer.clear();
  answer = std::string(core::Trim(answer, core::kWhitespace));
  std::transform(answer.begin(), answer.end(), answer.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (answer == "y" || answer == "yes") return {};
  return core::Fail(ErrorCode::kFailedPrecondition, "cancelled", cancelled);
}

CLI::Validator NamedArgument() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const bool blank = std::all_of(value.begin(), value.end(),
                                       [](unsigned char c) { return std::isspace(c) != 0; });
        if (blank) return "must not be empty";
        const bool control = std::any_of(value.begin(), value.end(),
                                         [](unsigned char c) { return std::iscntrl(c) != 0; });
        if (control) return "must not contain control characters";
        return "";
      },
      "", "named argument");
}

}  // namespace gpuwerk::cli::internal
