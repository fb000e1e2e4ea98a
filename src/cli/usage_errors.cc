// Usage errors (CLI11's parse errors) as one clear line, with a suggestion for a mistyped verb,
// or as problem JSON under --json.
#include <algorithm>
#include <cctype>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/internal/verb_support.h"
#include "cli/output.h"

namespace gpuwerk::cli {
namespace {

/// The names (first) and aliases of `app`'s subcommands.
std::vector<std::string> VerbNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  for (const CLI::App* sub : app.get_subcommands({})) {
    for (const auto& alias : sub->get_aliases()) names.push_back(alias);
  }
  return names;
}

const CLI::App* SubcommandNamed(const CLI::App& app, std::string_view word) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->check_name(std::string(word))) return sub;
  }
  return nullptr;
}

/// The name among `app`'s subcommands closest to `word`: within edit distance 2 (1 for words of
/// up to 3 letters); "" when none is that close. Ties go to the first (names before aliases).
std::string ClosestVerb(const CLI::App& app, std::string_view word) {
  std::string best;
  size_t best_distance = word.size() <= 3 ? 2 : 3;
  for (const auto& name : VerbNames(app)) {
    const size_t d = EditDistance(word, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

/// Whether `word` takes the next argument as its value on `app` (an option with a value).
bool TakesValue(const CLI::App& app, std::string_view word) {
  if (word.find('=') != std::string_view::npos) return false;
  const CLI::Option* option = app.get_option_no_throw(std::string(word));
  return option != nullptr && option->get_type_size() != 0;
}

/// For `args` (without the program name) that name a verb that does not exist, the message that
/// says so and suggests the closest verb path ("did you mean `gpuwerk instances ls`?"); "" when
/// every word that should be a verb is one.
std::string MistypedVerbMessage(const CLI::App& root, const std::vector<std::string>& args) {
  const CLI::App* current = &root;
  std::string path = "gpuwerk";
  size_t i = 0;
  auto next_word = [&]() -> const std::string* {
    while (i < args.size()) {
      const std::string& a = args[i++];
      if (a == "--") return nullptr;
      if (a.starts_with("-")) {
        if (TakesValue(*current, a)) ++i;
        continue;
      }
      return &a;
    }
    return nullptr;
  };
  while (!current->get_subcommands({}).empty()) {
    const std::string* word = next_word();
    if (word == nullptr) return "";
    if (const CLI::App* sub = SubcommandNamed(*current, *word)) {
      current = sub;
      path += " " + sub->get_name();
      continue;
    }
    // Not a verb at this level: a mistake, unless this command takes positionals of its own.
    if (!current->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty()) {
      return "";
    }
    const std::string typed = *word;
    std::string closest = ClosestVerb(*current, typed);
    std::string message = "'" + SafeText(typed) + "' is not a command of `" + path + "`";
    if (closest.empty()) {
      return message + "; see '" + path + " --help'";
    }
    // Follow the rest of the words under the suggestion, correcting them too.
    std::string suggestion = path + " " + closest;
    const CLI::App* sub = SubcommandNamed(*current, closest);
    while (sub != nullptr && !sub->get_subcommands({}).empty()) {
      current = sub;
      const std::string* more = next_word();
      if (more == nullptr) break;
      std::string fixed = SubcommandNamed(*sub, *more) ? *more : ClosestVerb(*sub, *more);
      if (fixed.empty()) break;
      suggestion += " " + fixed;
      sub = SubcommandNamed(*sub, fixed);
    }
    return message + "; did you mean `" + suggestion + "`?";
  }
  return "";
}

/// Whether `word` is one of ssh's own options that take the next argument as their value
/// (ssh(1): -B -b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w), written alone.
bool SshOptionTakesValue(std::string_view word) {
  constexpr std::string_view kWithValue = "BbcDEeFIiJLlmOopQRSWw";
  return word.size() == 2 && word[0] == '-' && kWithValue.find(word[1]) != std::string_view::npos;
}

/// For `args` of `gpuwerk ssh` that put ssh's own options (e.g. `-i KEY`) before `--`, where
/// CLI11 answers "The following argument was not expected: -i", the message that says ssh options
/// go after `--`, with the command reordered: "gpuwerk ssh alpha -- -i KEY hostname". "" when the
/// verb is not `ssh` or no such option is there.
std::string SshOptionsMessage(const CLI::App& root, const std::vector<std::string>& args) {
  const CLI::App* ssh = SubcommandNamed(root, "ssh");
  if (ssh == nullptr) return "";
  size_t i = 0;
  while (i < args.size() && args[i].starts_with("-") && args[i] != "--") {
    i += TakesValue(root, args[i]) ? 2 : 1;  // options before the verb
  }
  if (i >= args.size() || !ssh->check_name(args[i])) return "";
  std::vector<std::string> own, ssh_options, rest;
  std::string name;
  bool after_dashes = false;
  for (++i; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (after_dashes) {
      rest.push_back(a);
    } else if (a == "--") {
      after_dashes = true;
    } else if (!a.starts_with("-") || a == "-") {
      if (name.empty()) {
        name = a;
      } else {
        rest.push_back(a);
      }
    } else if (ssh->get_option_no_throw(a.substr(0, a.find('='))) != nullptr ||
               root.get_option_no_throw(a.substr(0, a.find('='))) != nullptr) {
      own.push_back(a);  // gpuwerk's own option (--json, --url URL): stays before `--`
      if (TakesValue(*ssh, a) || TakesValue(root, a)) {
        if (i + 1 < args.size()) own.push_back(args[++i]);
      }
    } else {
      ssh_options.push_back(a);
      if (SshOptionTakesValue(a) && i + 1 < args.size()) ssh_options.push_back(args[++i]);
    }
  }
  if (ssh_options.empty()) return "";
  std::string command = "gpuwerk ssh " + (name.empty() ? std::string("NAME") : SafeText(name));
  for (const auto& a : own) command += " " + SafeText(a);
  command += " --";
  for (const auto& a : ssh_options) command += " " + SafeText(a);
  for (const auto& a : rest) command += " " + SafeText(a);
  return "ssh's own options (" + SafeText(ssh_options.front()) +
         ") go after `--`, which ends gpuwerk's options: `" + command + "`";
}

/// The deepest command `app.parse()` reached (`app` itself when no verb was parsed), and its
/// words ("gpuwerk instances create").
const CLI::App* ParsedCommand(const CLI::App& app, std::string* path) {
  const CLI::App* current = &app;
  *path = "gpuwerk";
  while (true) {
    const std::vector<CLI::App*> parsed = current->get_subcommands();
    if (parsed.empty()) return current;
    current = parsed.front();
    *path += " " + current->get_name();
  }
}

/// Whether `word` names an option of `cmd` or of a command above it (options fall through to
/// the parents).
bool IsOptionOf(const CLI::App* cmd, const std::string& word) {
  const std::string name = word.substr(0, word.find('='));
  for (; cmd != nullptr; cmd = cmd->get_parent()) {
    if (cmd->get_option_no_throw(name) != nullptr) return true;
  }
  return false;
}

/// CLI11's `what` as the middle of one of our lines: its first letter lower-cased when the
/// word is not an upper-case name ("NAME is required" stays), no trailing full stop.
std::string AsClause(std::string what) {
  if (what.size() >= 2 && std::isupper(static_cast<unsigned char>(what[0])) &&
      std::islower(static_cast<unsigned char>(what[1]))) {
    what[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(what[0])));
  }
  while (!what.empty() && (what.back() == '.' || what.back() == '\n')) what.pop_back();
  return SafeText(what);
}

/// A usage error in the CLI's own words: what is wrong and where to look; and its stable code.
struct UsageProblem {
  std::string code;
  std::string message;
};
UsageProblem DescribeParseError(const CLI::App& app, const CLI::ParseError& error,
                                const std::vector<std::string>& args) {
  std::string path;
  const CLI::App* cmd = ParsedCommand(app, &path);
  const std::string see = "; see `" + path + " --help`";
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    for (const std::string& a : args) {
      if (a == "--") break;
      if (a.size() > 1 && a.starts_with("-") && !IsOptionOf(cmd, a)) {
        return {"unknown_option", "unknown option " + SafeText(a.substr(0, a.find('='))) + see};
      }
    }
    return {"unexpected_argument", AsClause(error.what()) + see};
  }
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr ||
      dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    return {"missing_argument", AsClause(error.what()) + see};
  }
  return {"usage_error", AsClause(error.what()) + see};
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

int ReportUsageError(CLI::App& app, const CLI::ParseError& error,
                     const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (error.get_exit_code() == 0) return app.exit(error, out, err);  // --help, --version
  const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
  UsageProblem problem{"usage_error", SshOptionsMessage(app, args)};
  if (problem.message.empty()) {
    problem = {"unknown_command", MistypedVerbMessage(app, args)};
  }
  if (problem.message.empty()) problem = DescribeParseError(app, error, args);
  if (json) {
    const core::Error e(core::ErrorCode::kInvalidArgument, problem.code, problem.message);
    err << internal::ProblemJson(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
  } else {
    err << "gpuwerk: " << problem.message << "\n";
  }
  err.flush();
  return error.get_exit_code();
}

}  // namespace gpuwerk::cli
