#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "app/options.h"
#include "core/error.h"

namespace gpuwerk::app {

namespace options_internal {

/// Registers `--config FILE` and one flag per option (writing into `flags`) on `cmd`.
void AddFlags(CLI::App& cmd, std::span<const BoundOption> flags, std::string& config_file,
              std::string_view config_env);
/// defaults < file < environment < the flags given on `cmd`, into `into`; then the required
/// check. Keys of the file in `file_ignored` are skipped (LoadConfigFile).
/// Errors: kInvalidArgument "invalid_config", naming the source and the option.
core::Result<void> Resolve(const CLI::App& cmd, std::span<const BoundOption> flags,
                           const std::string& config_file, std::string_view config_env,
                           std::span<const BoundOption> into,
                           std::span<const std::string> file_ignored = {});

}  // namespace options_internal

/// The options of one command (`gpuwerk server`, `up`, `agent`, `relay`) on its CLI11
/// subcommand: a flag for every option plus `--config FILE` (or the variable `config_env`), and
/// Resolve() for the values after parsing, by precedence defaults < config file < environment
/// (`GPUWERK_<KEY>`) < flags. Keys in `file_ignored` may stand in the config file and are
/// skipped (a command reading another's file). Not copyable or movable: CLI11 keeps pointers
/// into it.
template <class Config>
class CommandConfig {
 public:
  CommandConfig(CLI::App& cmd, std::vector<Option<Config>> options, std::string config_env,
                std::vector<std::string> file_ignored = {})
      : cmd_(cmd),
        options_(std::move(options)),
        config_env_(std::move(config_env)),
        file_ignored_(std::move(file_ignored)),
        flags_(std::make_unique<Config>()),
        bound_flags_(Bind(options_, *flags_)) {
    options_internal::AddFlags(cmd_, bound_flags_, config_file_, config_env_);
  }
  CommandConfig(const CommandConfig&) = delete;
  CommandConfig& operator=(const CommandConfig&) = delete;

  /// The values after the command line was parsed. Errors: kInvalidArgument "invalid_config"
  /// (a bad file, variable, or a required option that no source gives).
  core::Result<Config> Resolve() const {
    Config config;
    GPUWERK_TRY(options_internal::Resolve(cmd_, bound_flags_, config_file_, config_env_,
                                          Bind(options_, config), file_ignored_));
    return config;
  }

 private:
  CLI::App& cmd_;
  std::vector<Option<Config>> options_;
  std::string config_env_;
  std::vector<std::string> file_ignored_;
  std::string config_file_;
  std::unique_ptr<Config> flags_;  ///< what CLI11 writes the flags into
  std::vector<BoundOption> bound_flags_;
};

/// Adds the subcommand `name` to `app` with the options `options` (CommandConfig, the file named
/// by `config_env` when no --config is given). When the subcommand is parsed, resolves its
/// options and stores `run(config)` in `exit_code`; options that do not resolve store 2 and print
/// "gpuwerk NAME: <reason>" on stderr. Keys in `file_ignored` may stand in the config file
/// (CommandConfig). Returns the subcommand.
template <class Config>
CLI::App* AddConfiguredCommand(CLI::App& app, const std::string& name,
                               const std::string& description, std::vector<Option<Config>> options,
                               std::string config_env, std::function<int(const Config&)> run,
                               int& exit_code, std::vector<std::string> file_ignored = {}) {
  CLI::App* cmd = app.add_subcommand(name, description);
  auto config = std::make_shared<CommandConfig<Config>>(
      *cmd, std::move(options), std::move(config_env), std::move(file_ignored));
  cmd->callback([config, run = std::move(run), name, &exit_code] {
    auto resolved = config->Resolve();
    if (!resolved) {
      std::fprintf(stderr, "gpuwerk %s: %s\n", name.c_str(), resolved.error().message.c_str());
      exit_code = 2;
      return;
    }
    exit_code = run(*resolved);
  });
  return cmd;
}

}  // namespace gpuwerk::app
