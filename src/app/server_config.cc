#include "app/server_config.h"

#include <toml++/toml.h>

#include <cstdlib>
#include <functional>
#include <map>

namespace gpuwerk::app {
namespace {

core::Error ConfigError(std::string message) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_config", std::move(message));
}

/// Each option: its name and how to set it from text.
using Setter = std::function<core::Result<void>(ServerConfig&, const std::string&)>;

Setter Text(std::string ServerConfig::*field) {
  return [field](ServerConfig& c, const std::string& v) -> core::Result<void> {
    c.*field = v;
    return {};
  };
}

template <class Int>
Setter Number(Int ServerConfig::*field, const char* name) {
  return [field, name](ServerConfig& c, const std::string& v) -> core::Result<void> {
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') {
      return std::unexpected(ConfigError(std::string(name) + " must be a whole number"));
    }
    c.*field = static_cast<Int>(n);
    return {};
  };
}

const std::map<std::string, Setter>& Options() {
  static const std::map<std::string, Setter> kOptions = {
      {"data_dir",
       [](ServerConfig& c, const std::string& v) -> core::Result<void> {
         c.data_dir = v;
         return {};
       }},
      {"listen", Text(&ServerConfig::listen)},
      {"public_url", Text(&ServerConfig::public_url)},
      {"mail", Text(&ServerConfig::mail)},
      {"smtp_url", Text(&ServerConfig::smtp_url)},
      {"smtp_from", Text(&ServerConfig::smtp_from)},
      {"smtp_username", Text(&ServerConfig::smtp_username)},
      {"smtp_password", Text(&ServerConfig::smtp_password)},
      {"smtp_starttls", Text(&ServerConfig::smtp_starttls)},
      {"log_level", Text(&ServerConfig::log_level)},
      {"password_hash_cost", Text(&ServerConfig::password_hash_cost)},
      {"http_threads", Number(&ServerConfig::http_threads, "http_threads")},
      {"body_limit_bytes", Number(&ServerConfig::body_limit_bytes, "body_limit_bytes")},
      {"read_timeout_seconds", Number(&ServerConfig::read_timeout_seconds, "read_timeout_seconds")},
      {"idle_timeout_seconds", Number(&ServerConfig::idle_timeout_seconds, "idle_timeout_seconds")},
      {"sign_in_failures_per_account",
       Number(&ServerConfig::sign_in_failures_per_account, "sign_in_failures_per_account")},
      {"sign_in_failures_per_address",
       Number(&ServerConfig::sign_in_failures_per_address, "sign_in_failures_per_address")},
      {"sign_in_window_seconds",
       Number(&ServerConfig::sign_in_window_seconds, "sign_in_window_seconds")},
      {"instance_image", Text(&ServerConfig::instance_image)},
      {"instance_memory_bytes",
       Number(&ServerConfig::instance_memory_bytes, "instance_memory_bytes")},
      {"host_unknown_after_seconds",
       Number(&ServerConfig::host_unknown_after_seconds, "host_unknown_after_seconds")},
      {"operator_email", Text(&ServerConfig::operator_email)},
      {"operator_password", Text(&ServerConfig::operator_password)},
      {"engine", Text(&ServerConfig::engine)},
      {"ssh_listen", Text(&ServerConfig::ssh_listen)},
      {"ssh_domain", Text(&ServerConfig::ssh_domain)},
      {"ssh_port", Number(&ServerConfig::ssh_port, "ssh_port")},
  };
  return kOptions;
}

}  // namespace

core::Result<void> LoadConfigFile(const std::filesystem::path& path, ServerConfig& config) {
  toml::table table;
  try {
    table = toml::parse_file(path.string());
  } catch (const toml::parse_error& err) {
    return std::unexpected(ConfigError(path.string() + ":" +
                                       std::to_string(err.source().begin.line) + ": " +
                                       std::string(err.description())));
  }
  for (const auto& [key, node] : table) {
    std::string name(key.str());
    auto it = Options().find(name);
    if (it == Options().end()) {
      return std::unexpected(ConfigError(path.string() + ": unknown option '" + name + "'"));
    }
    std::string text;
    if (auto s = node.value<std::string>()) {
      text = *s;
    } else if (auto n = node.value<int64_t>()) {
      text = std::to_string(*n);
    } else {
      return std::unexpected(
          ConfigError(path.string() + ": option '" + name + "' must be a string or an integer"));
    }
    GPUWERK_TRY(it->second(config, text));
  }
  return {};
}

core::Result<void> ApplyEnvironment(ServerConfig& config) {
  for (const auto& [name, set] : Options()) {
    std::string env = "GPUWERK_";
    for (char c : name) env += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (const char* v = std::getenv(env.c_str())) GPUWERK_TRY(set(config, v));
  }
  return {};
}

core::Result<void> Validate(const ServerConfig& c) {
  if (c.mail != "maildir" && c.mail != "smtp") {
    return std::unexpected(ConfigError("mail must be 'maildir' or 'smtp'"));
  }
  if (c.mail == "smtp" && c.smtp_url.empty()) {
    return std::unexpected(ConfigError("mail = 'smtp' needs smtp_url (e.g. smtp://mail:25)"));
  }
  if (c.smtp_starttls != "never" && c.smtp_starttls != "if-offered" &&
      c.smtp_starttls != "required") {
    return std::unexpected(ConfigError("smtp_starttls must be never, if-offered or required"));
  }
  if (c.password_hash_cost != "interactive" && c.password_hash_cost != "moderate" &&
      c.password_hash_cost != "test-only-minimum") {
    return std::unexpected(
        ConfigError("password_hash_cost must be interactive, moderate or test-only-minimum"));
  }
  if (c.http_threads < 1 || c.http_threads > 256) {
    return std::unexpected(ConfigError("http_threads must be from 1 to 256"));
  }
  if (c.body_limit_bytes < 1024) {
    return std::unexpected(ConfigError("body_limit_bytes must be at least 1024"));
  }
  if (c.read_timeout_seconds < 1 || c.idle_timeout_seconds < 1 || c.sign_in_window_seconds < 1 ||
      c.sign_in_failures_per_account < 1 || c.sign_in_failures_per_address < 1) {
    return std::unexpected(ConfigError("timeouts, windows and limits must be positive"));
  }
  if (c.instance_image.empty()) {
    return std::unexpected(ConfigError("instance_image must not be empty"));
  }
  if (c.instance_memory_bytes < 0) {
    return std::unexpected(ConfigError("instance_memory_bytes must be 0 (no limit) or more"));
  }
  if (c.host_unknown_after_seconds < 1) {
    return std::unexpected(ConfigError("host_unknown_after_seconds must be positive"));
  }
  if (!c.operator_email.empty() && c.operator_password.size() < 12) {
    return std::unexpected(
        ConfigError("operator_email needs operator_password of at least 12 characters (set "
                    "GPUWERK_OPERATOR_PASSWORD)"));
  }
  if (c.ssh_port < 1 || c.ssh_port > 65535) {
    return std::unexpected(ConfigError("ssh_port must be from 1 to 65535"));
  }
  if (!c.engine.empty() && !c.engine.starts_with("unix:///")) {
    return std::unexpected(ConfigError("engine must be unix:///PATH"));
  }
  if (!c.public_url.empty() && !c.public_url.starts_with("http://") &&
      !c.public_url.starts_with("https://")) {
    return std::unexpected(ConfigError("public_url must start with http:// or https://"));
  }
  return {};
}

}  // namespace gpuwerk::app
