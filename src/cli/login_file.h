#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::cli {

/// Looks up an environment variable; nullopt when unset. Tests pass a map-backed lookup instead
/// of the process environment.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

/// The process environment (getenv). An empty value counts as unset.
EnvLookup ProcessEnvironment();

/// The server URL used when neither a flag, GPUWERK_URL nor the login file names one (the
/// default `--listen` of `gpuwerk up`).
inline constexpr std::string_view kDefaultServerUrl = "http://127.0.0.1:8080";

/// What `gpuwerk login` saves: the login file's JSON `{"url": …, "token": …, "email": …}`.
struct Login {
  std::string url;    ///< the server's base URL, e.g. "http://127.0.0.1:8080"
  std::string token;  ///< the API token, "gwt_…"
  std::string email;  ///< whose token it is, for messages

  bool operator==(const Login&) const = default;
};

/// Where the login file lives: `$GPUWERK_CONFIG_DIR/login.json`, else
/// `$XDG_CONFIG_HOME/gpuwerk/login.json`, else `$HOME/.config/gpuwerk/login.json`.
/// Errors: kFailedPrecondition "no_config_dir" when none of the three variables is set.
core::Result<std::filesystem::path> LoginFilePath(const EnvLookup& env);

/// Reads the login file at `path`; nullopt when it does not exist. Errors: kFailedPrecondition
/// "invalid_login_file" when it cannot be read or is not the JSON above (the message names the
/// path, never the contents).
core::Result<std::optional<Login>> ReadLoginFile(const std::filesystem::path& path);

/// Writes `login` to `path` atomically: a temporary file beside it, created with
/// open(O_CREAT|O_EXCL, 0600), written and fsynced, then renamed over `path`. Missing parent
/// directories are created with mode 0700. Errors: kInternal "login_file_write_failed" (the
/// message has the path and errno text).
core::Result<void> WriteLoginFile(const std::filesystem::path& path, const Login& login);

/// Removes the login file. Answers false when there was none. Errors: kInternal
/// "login_file_remove_failed".
core::Result<bool> RemoveLoginFile(const std::filesystem::path& path);

/// `--url` / `--token` given on the command line; empty when not given.
struct TargetFlags {
  std::string url;
  std::string token;
};

/// The server and credentials a client verb talks to.
struct Target {
  std::string url;
  std::string token;
  std::string email;  ///< from the login file when it supplied the token; may be empty
};

/// Resolves the server URL and API token, each on its own: the flag, else GPUWERK_URL /
/// GPUWERK_TOKEN, else the login file's (read only when needed); the URL finally falls back to
/// kDefaultServerUrl. Errors: kUnauthenticated "not_logged_in" when no token is found anywhere;
/// those of LoginFilePath (only when the file is needed and a token is still missing) and
/// ReadLoginFile.
core::Result<Target> ResolveTarget(const TargetFlags& flags = {},
                                   const EnvLookup& env = ProcessEnvironment());

}  // namespace gpuwerk::cli
