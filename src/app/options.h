#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error.h"

namespace gpuwerk::app {

/// Where an option's value lives in its command's config struct (which holds the type and the
/// default: the struct's member initializer).
template <class Config>
using OptionField =
    std::variant<std::string Config::*, int Config::*, int64_t Config::*,
                 std::filesystem::path Config::*, std::vector<std::string> Config::*>;

/// One option of a command, declared once. From `key` come its TOML key (`key`), its environment
/// variable (`GPUWERK_` + `key` in upper case) and, unless `flag` says otherwise, its flag (`--`
/// + `key` with '-' for '_'). The flag, the file key and the variable are generated from this
/// (CommandConfig, app/command_config.h), and so are the tables of docs/configuration.md
/// (OptionsMarkdown).
template <class Config>
struct Option {
  std::string_view key;        ///< snake_case, e.g. "public_url"
  OptionField<Config> field;   ///< e.g. &ServerConfig::public_url
  std::string_view help;       ///< one or two sentences, for --help and the docs
  std::string_view flag = {};  ///< the flag when it is not --<key>, e.g. "--data"
  /// The default as people read it, when the field's initial value does not say it (e.g.
  /// "http://<listen>" for an empty public_url).
  std::string_view shown_default = {};
  std::string_view details = {};  ///< more for the docs than --help shows
  bool required = false;          ///< Resolve fails when no source gives a non-empty value
  /// A credential (a token, a password): never taken from the command line, where every user of
  /// the machine reads it in /proc/PID/cmdline. Its flag names a file holding it instead
  /// (`flag`, or `--` + key + `-file`); the flag without `-file` is refused with a message that
  /// says so. The environment variable and the config file key hold the value itself.
  bool secret = false;
};

/// A pointer to one value of one config object.
using OptionValue =
    std::variant<std::string*, int*, int64_t*, std::filesystem::path*, std::vector<std::string>*>;

/// An option declaration together with where its value lives in one config object.
struct BoundOption {
  std::string_view key;
  std::string_view help;
  std::string_view flag;
  std::string_view shown_default;
  std::string_view details;
  bool required = false;
  bool secret = false;
  OptionValue value;

  /// e.g. "--public-url"; for a secret the file flag, e.g. "--smtp-password-file".
  std::string Flag() const;
  /// For a secret: the flag that would carry the value on the command line, refused (Flag()
  /// without "-file", e.g. "--smtp-password"); empty otherwise.
  std::string RefusedFlag() const;
  std::string EnvName() const;  ///< e.g. "GPUWERK_PUBLIC_URL"
  /// The value as people read it, without quotes: shown_default when set, else the value (a
  /// list's items joined with ", "); "" for none.
  std::string Shown() const;
  /// Whether the value is empty text or an empty list (a number never is).
  bool Empty() const;
};

/// The options of `options` bound to the fields of `config` (which must outlive the result).
template <class Config>
std::vector<BoundOption> Bind(const std::vector<Option<Config>>& options, Config& config) {
  std::vector<BoundOption> bound;
  bound.reserve(options.size());
  for (const Option<Config>& o : options) {
    OptionValue value = std::visit(
        [&config](auto Config::*member) -> OptionValue { return &(config.*member); }, o.field);
    bound.push_back(
        {o.key, o.help, o.flag, o.shown_default, o.details, o.required, o.secret, value});
  }
  return bound;
}

/// Reads the TOML file `path` (toml++) into `options`: a key not given keeps its value; an
/// unknown key, a value of the wrong type (strings for text, integers for numbers, a string or an
/// array of strings for lists) or a number out of range is an error. A key in `ignored` is
/// accepted and skipped (a command that reads another command's file, as `admin migrate` reads
/// the server's, without its every option).
/// Errors: kInvalidArgument "invalid_config" naming the file (and line for syntax errors).
core::Result<void> LoadConfigFile(const std::filesystem::path& path,
                                  std::span<const BoundOption> options,
                                  std::span<const std::string> ignored = {});

/// Reads a secret from the file `path` (a secret option's file flag): its text without one
/// trailing newline (LF or CRLF). Errors: kInvalidArgument "invalid_config" naming `flag` and
/// the file when it cannot be read, is larger than 64 KiB, is empty or holds more than one line.
core::Result<std::string> ReadSecretFile(const std::filesystem::path& path, std::string_view flag);

/// Applies the `GPUWERK_<KEY>` environment variables that are set to `options`; a list takes one
/// item per line. Errors: kInvalidArgument "invalid_config" naming the variable, for a number
/// that does not parse.
core::Result<void> ApplyEnvironment(std::span<const BoundOption> options);

/// The Markdown table of `options` for docs/configuration.md: flag, environment variable, TOML
/// key, default (from a default-constructed Config unless shown_default says otherwise) and
/// meaning (help, then details), one row per option, ending in a newline.
std::string OptionsMarkdown(std::span<const BoundOption> options);

template <class Config>
std::string OptionsMarkdown(const std::vector<Option<Config>>& options) {
  Config defaults;
  return OptionsMarkdown(Bind(options, defaults));
}

/// An option's "ADDR:PORT" value, split.
struct AddressPort {
  std::string address;  ///< without the brackets of an IPv6 address ("[::1]:2222" → "::1")
  uint16_t port = 0;    ///< 0 to 65535
};

/// Splits "ADDR:PORT" at its last ':'. Errors: kInvalidArgument "invalid_address" with the
/// message "must be ADDR:PORT, got 'TEXT'" (callers put the option's name before it).
core::Result<AddressPort> ParseAddressPort(const std::string& text);

}  // namespace gpuwerk::app
