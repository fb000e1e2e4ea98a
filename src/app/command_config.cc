#include "app/command_config.h"

#include <cstdlib>

namespace gpuwerk::app {
namespace {

core::Error ConfigError(std::string message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_config", std::move(message));
}

bool Given(const CLI::App& cmd, const std::string& flag) {
  return cmd.get_option_no_throw(flag) != nullptr && cmd.count(flag) > 0;
}

}  // namespace

namespace options_internal {

void AddFlags(CLI::App& cmd, std::span<const BoundOption> flags, std::string& config_file,
              std::string_view config_env) {
  cmd.add_option(
      "--config", config_file,
      "TOML config file, keys as in docs/configuration.md (also " + std::string(config_env) + ")");
  for (const BoundOption& o : flags) {
    const std::string help = std::string(o.help) + (o.required ? " (required)" : "");
    if (o.secret) {
      // The file flag takes a path (kept in the option's own string until Resolve reads it);
      // the value flag stays known to CLI11, hidden, so that Resolve can refuse it by name.
      auto* path = std::get<std::string*>(o.value);
      cmd.add_option(o.Flag(), *path, help + "; a file holding it (never the value itself)");
      if (const std::string refused = o.RefusedFlag(); !refused.empty()) {
        cmd.add_option(refused, *path)->group("");
      }
      continue;
    }
    CLI::Option* added =
        std::visit([&](auto* value) { return cmd.add_option(o.Flag(), *value, help); }, o.value);
    const std::string shown = o.Shown();
    if (!shown.empty()) added->default_str(shown);
  }
}

core::Result<void> Resolve(const CLI::App& cmd, std::span<const BoundOption> flags,
                           const std::string& config_file, std::string_view config_env,
                           std::span<const BoundOption> into,
                           std::span<const std::string> file_ignored) {
  std::string file = config_file;
  if (file.empty()) {
    if (const char* env = std::getenv(std::string(config_env).c_str())) file = env;
  }
  if (!file.empty()) GPUWERK_TRY(LoadConfigFile(file, into, file_ignored));
  GPUWERK_TRY(ApplyEnvironment(into));
  for (const BoundOption& o : flags) {
    if (const std::string refused = o.RefusedFlag(); !refused.empty() && Given(cmd, refused)) {
      return std::unexpected(ConfigError(
          refused +
          " on the command line is readable by every user of this machine "
          "(/proc/PID/cmdline): put the value in a file readable only by you and pass " +
          o.Flag() + " FILE, or set " + o.EnvName() + ", or " + std::string(o.key) +
          " in the config file"));
    }
  }
  for (size_t i = 0; i < flags.size() && i < into.size(); ++i) {
    if (!Given(cmd, flags[i].Flag())) continue;
    if (flags[i].secret) {
      GPUWERK_ASSIGN_OR_RETURN(
          *std::get<std::string*>(into[i].value),
          ReadSecretFile(*std::get<std::string*>(flags[i].value), flags[i].Flag()));
      continue;
    }
    std::visit(
        [&](auto* from) {
          using T = std::remove_pointer_t<decltype(from)>;
          *std::get<T*>(into[i].value) = *from;
        },
        flags[i].value);
  }
  for (const BoundOption& o : into) {
    if (!o.required) continue;
    if (o.Empty()) {
      return std::unexpected(ConfigError(o.Flag() + " is required (or " + o.EnvName() + ", or " +
                                         std::string(o.key) + " in the config file)"));
    }
  }
  return {};
}

}  // namespace options_internal
}  // namespace gpuwerk::app
