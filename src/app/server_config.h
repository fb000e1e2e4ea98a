#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace gpuwerk::app {

/// Everything `gpuwerk server` (and `up`) can be told. Each field can come from the TOML config
/// file (key = the option name with '-' as '_', e.g. `public_url`), from the environment
/// (`GPUWERK_PUBLIC_URL`), or from the flag (`--public-url`); later sources win in that order.
struct ServerConfig {
  std::filesystem::path data_dir = "./gpuwerk-data";  ///< SQLite file, maildir, host keys
  std::string listen = "127.0.0.1:8080";              ///< HTTP address; port 0 picks one
  std::string public_url;        ///< external base URL for links; default http://<listen>
  std::string mail = "maildir";  ///< "maildir" (local outbox in the data dir) or "smtp"
  std::string smtp_url;          ///< e.g. smtp://127.0.0.1:2525 or smtps://mail:465
  std::string smtp_from = "gpuwerk <gpuwerk@localhost>";
  std::string smtp_username;
  std::string smtp_password;
  std::string smtp_starttls = "if-offered";  ///< "never", "if-offered" or "required"
  std::string log_level = "info";
  std::string password_hash_cost =
      "interactive";  ///< "interactive", "moderate", "test-only-minimum"
  int http_threads = 4;
  int64_t body_limit_bytes = 1 << 20;  ///< largest accepted request body (bytes)
  int read_timeout_seconds = 30;       ///< a request must arrive whole within this
  int idle_timeout_seconds = 60;       ///< keep-alive connections idle longer are closed
  int sign_in_failures_per_account = 5;
  int sign_in_failures_per_address = 20;
  int sign_in_window_seconds = 900;  ///< the sliding window of both limits
  /// The container image every instance runs (production: a CUDA base with openssh-server).
  std::string instance_image = "localhost/gpuwerk-instance:bookworm";
  int64_t instance_memory_bytes = 0;    ///< each container's memory limit; 0 = no limit
  int host_unknown_after_seconds = 30;  ///< a host silent this long makes its instances unknown
  /// Bootstrap: when set, the server creates this operator account at start if no account has
  /// the email (an existing account is left as it is). Needs operator_password (≥ 12
  /// characters); give it through the environment (GPUWERK_OPERATOR_PASSWORD) or a 0600 config
  /// file, never a flag. `gpuwerk up` makes its own operator when this is unset.
  std::string operator_email;
  std::string operator_password;
  /// `gpuwerk up` only: the container engine, `unix:///PATH`; empty: find or start one.
  std::string engine;
  /// The SSH domain of the relays (e.g. "ssh.example.com", a wildcard DNS name pointing at
  /// them): instances then show `ssh <hostname>@<hostname>.<ssh_domain>` (docs/ssh.md); empty:
  /// the direct command to the container's sshd, or under `gpuwerk up` its relay's address.
  std::string ssh_domain;
  int ssh_port = 22;  ///< the relays' public SSH port, with ssh_domain
  /// `gpuwerk up` only: where the SSH relay listens, "ADDR:PORT" (numeric address); port 0
  /// picks a free one.
  std::string ssh_listen = "127.0.0.1:2222";
};

/// Reads `path` (TOML, parsed by toml++) into `config`; keys not given keep their values.
/// Errors: kInvalidArgument "invalid_config" naming the file, line and key.
core::Result<void> LoadConfigFile(const std::filesystem::path& path, ServerConfig& config);

/// Applies `GPUWERK_<OPTION>` environment variables to `config`.
/// Errors: kInvalidArgument "invalid_config" for a number that does not parse.
core::Result<void> ApplyEnvironment(ServerConfig& config);

/// Checks values that flags and files cannot check by type. Errors: "invalid_config".
core::Result<void> Validate(const ServerConfig& config);

}  // namespace gpuwerk::app
