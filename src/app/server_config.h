#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "app/options.h"
#include "core/error.h"

namespace gpuwerk::app {

/// Everything `gpuwerk server` (and `up`) can be told: the type and default of each option. Each
/// field can come from the TOML config file (`public_url`), from the environment
/// (`GPUWERK_PUBLIC_URL`), or from the flag (`--public-url`); later sources win in that order.
/// The options are declared in ServerOptions() and UpOptions(); docs/configuration.md shows them.
struct ServerConfig {
  std::filesystem::path data_dir = "./gpuwerk-data";
  /// The store (store::OpenDatabase): empty for the SQLite file DATA/gpuwerk.db, a SQLite file's
  /// path, or a PostgreSQL connection URI (postgresql://…; docs/database.md)
  std::string database;
  std::string listen = "127.0.0.1:8080";
  std::string public_url;  ///< empty: http://<listen>
  std::string mail = "maildir";
  std::string smtp_url;
  std::string smtp_from = "gpuwerk <gpuwerk@localhost>";
  std::string smtp_username;
  std::string smtp_password;
  std::string smtp_starttls = "if-offered";
  std::string log_level = "info";
  std::string password_hash_cost = "interactive";
  int http_threads = 4;
  int64_t body_limit_bytes = 1 << 20;  ///< bytes
  int read_timeout_seconds = 30;
  int idle_timeout_seconds = 60;
  int http_connections_per_source = 256;  ///< 0: no cap
  int64_t http_max_connections = 0;       ///< 0: automatic, from the open-file limit
  /// CIDRs of the reverse proxies whose X-Forwarded-For is believed (api::TrustedProxies)
  std::vector<std::string> trusted_proxies;
  int sign_in_failures_per_account = 5;
  int sign_in_failures_per_address = 20;
  int sign_in_window_seconds = 900;
  std::string sign_up_policy = "open";       ///< open, domains or invite (auth::SignUpPolicy)
  std::vector<std::string> sign_up_domains;  ///< sign_up_policy = domains: who may sign up
  std::string instance_image = "localhost/gpuwerk-instance:bookworm";
  int64_t instance_memory_bytes = 0;  ///< bytes; 0: no limit
  int host_unknown_after_seconds = 30;
  /// PostgreSQL: how long the leader lease lasts, in seconds (docs/scale-out.md); renewed every
  /// third of it.
  int leader_lease_seconds = 15;
  std::string payment_provider = "manual";  ///< manual or stripe (docs/billing.md "Providers")
  std::string stripe_api_base = "https://api.stripe.com";
  std::string stripe_secret_key;       ///< "sk_…"; payment_provider = stripe
  std::string stripe_webhook_secrets;  ///< "whsec_…", comma-separated while rolling
  std::string operator_email;          ///< empty: no bootstrap operator (`up` makes its own)
  std::string operator_password;
  std::string engine;  ///< `up` only; empty: find or start one
  std::string ssh_domain;
  int ssh_port = 22;
  /// Test suites only: the server's clock runs this many seconds ahead of the system's (0 to
  /// 366 days; main's OffsetClock), so that an end-to-end test can close a month.
  int64_t test_clock_offset_seconds = 0;
  std::string ssh_listen = "127.0.0.1:2222";  ///< `up` only
  /// `up` only: the memory limit of the relay's process, MiB (app::RelayProcess).
  int64_t relay_memory_limit_mib = 2048;
  /// `up` only: the TCP balancers whose PROXY protocol header the relay believes (CIDRs).
  std::vector<std::string> relay_trusted_proxies;
  /// `up` only: Docker inside the local agent's instances (off | sysbox | privileged) and their
  /// /dev/shm size, bytes (agent/instance_runtime.h; docs/docker-inside.md).
  std::string docker_inside = "off";
  int64_t instance_shm_bytes = 0;
};

/// The options of `gpuwerk server` (and `up`), one declaration each (app/options.h).
const std::vector<Option<ServerConfig>>& ServerOptions();

/// What `gpuwerk up` has beyond ServerOptions(): `engine`, `ssh_listen`,
/// `relay_memory_limit_mib`, `relay_trusted_proxies`, `docker_inside` and `instance_shm_bytes`.
const std::vector<Option<ServerConfig>>& UpOnlyOptions();

/// ServerOptions() then UpOnlyOptions(): the options of `gpuwerk up`.
std::vector<Option<ServerConfig>> UpOptions();

/// Checks values that flags and files cannot check by type, `listen` and `ssh_listen` among
/// them (their form; whether they can be bound shows at start), so that `server` and `up` refuse
/// bad input before they create anything. Errors: "invalid_config".
core::Result<void> Validate(const ServerConfig& config);

/// The `billing:` line of `gpuwerk up`'s banner: the provider in use (`config.payment_provider`),
/// whether a manual payment method was recorded for operator `email` at this start
/// (`card_recorded`; false: one was on file already), and how everyone else adds a card (manual:
/// the operator's `gpuwerk admin billing set-card`; stripe: `gpuwerk billing add-card`, Stripe
/// Checkout).
std::string UpBillingLine(const ServerConfig& config, bool card_recorded, const std::string& email);

}  // namespace gpuwerk::app
