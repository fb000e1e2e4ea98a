// The `gpuwerk` binary: server, up, and the client verbs (DESIGN.md "Command line").
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#ifdef GPUWERK_WITH_AGENT
#include "app/agent_command.h"
#include "app/local_platform.h"
#endif
#include "app/relay_subcommand.h"
#include "app/server_app.h"
#include "app/server_config.h"
#include "cli/commands.h"
#include "core/logging.h"
#include "core/random.h"

namespace gpuwerk::app {
namespace {

/// Blocks SIGINT and SIGTERM in every thread (call before starting any) and returns the set, so
/// that main can wait for them with sigwait and stop cleanly.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

void AddServerOptions(CLI::App& cmd, ServerConfig& c, std::string& config_file) {
  cmd.add_option("--config", config_file, "TOML config file (options as keys, '-' as '_')");
  cmd.add_option("--data", c.data_dir, "data directory (SQLite store, local mail outbox)");
  cmd.add_option("--listen", c.listen, "HTTP listen address host:port");
  cmd.add_option("--public-url", c.public_url, "external base URL used in mailed links");
  cmd.add_option("--mail", c.mail, "maildir (local outbox) or smtp");
  cmd.add_option("--smtp-url", c.smtp_url, "SMTP server, e.g. smtp://127.0.0.1:25");
  cmd.add_option("--smtp-from", c.smtp_from, "sender address of mails");
  cmd.add_option("--smtp-username", c.smtp_username, "SMTP user name");
  cmd.add_option("--smtp-password", c.smtp_password, "SMTP password");
  cmd.add_option("--smtp-starttls", c.smtp_starttls, "never, if-offered or required");
  cmd.add_option("--log-level", c.log_level, "trace, debug, info, warn or error");
  cmd.add_option("--password-hash-cost", c.password_hash_cost,
                 "interactive, moderate or test-only-minimum (tests only)");
  cmd.add_option("--http-threads", c.http_threads, "HTTP worker threads");
  cmd.add_option("--body-limit-bytes", c.body_limit_bytes, "largest request body in bytes");
  cmd.add_option("--read-timeout-seconds", c.read_timeout_seconds, "whole-request read timeout");
  cmd.add_option("--idle-timeout-seconds", c.idle_timeout_seconds, "keep-alive idle timeout");
  cmd.add_option("--sign-in-failures-per-account", c.sign_in_failures_per_account,
                 "failed sign-ins per account per window");
  cmd.add_option("--sign-in-failures-per-address", c.sign_in_failures_per_address,
                 "failed sign-ins per source address per window");
  cmd.add_option("--sign-in-window-seconds", c.sign_in_window_seconds,
                 "sliding window of the sign-in limits");
}

/// Config precedence: defaults < config file < environment < flags. CLI11 has already written
/// the flags into `flags`; this re-applies them over the file and environment.
core::Result<ServerConfig> ResolveConfig(CLI::App& cmd, const ServerConfig& flags,
                                         const std::string& config_file) {
  ServerConfig c;
  std::string file = config_file;
  if (file.empty()) {
    if (const char* env = std::getenv("GPUWERK_CONFIG")) file = env;
  }
  if (!file.empty()) GPUWERK_TRY(LoadConfigFile(file, c));
  GPUWERK_TRY(ApplyEnvironment(c));
  // Options that only some subcommands have (e.g. --engine, `up` only) count as not given.
  auto given = [&](const char* name) {
    return cmd.get_option_no_throw(name) != nullptr && cmd.count(name) > 0;
  };
  if (given("--data")) c.data_dir = flags.data_dir;
  if (given("--listen")) c.listen = flags.listen;
  if (given("--public-url")) c.public_url = flags.public_url;
  if (given("--mail")) c.mail = flags.mail;
  if (given("--smtp-url")) c.smtp_url = flags.smtp_url;
  if (given("--smtp-from")) c.smtp_from = flags.smtp_from;
  if (given("--smtp-username")) c.smtp_username = flags.smtp_username;
  if (given("--smtp-password")) c.smtp_password = flags.smtp_password;
  if (given("--smtp-starttls")) c.smtp_starttls = flags.smtp_starttls;
  if (given("--log-level")) c.log_level = flags.log_level;
  if (given("--password-hash-cost")) c.password_hash_cost = flags.password_hash_cost;
  if (given("--http-threads")) c.http_threads = flags.http_threads;
  if (given("--body-limit-bytes")) c.body_limit_bytes = flags.body_limit_bytes;
  if (given("--read-timeout-seconds")) c.read_timeout_seconds = flags.read_timeout_seconds;
  if (given("--idle-timeout-seconds")) c.idle_timeout_seconds = flags.idle_timeout_seconds;
  if (given("--sign-in-failures-per-account"))
    c.sign_in_failures_per_account = flags.sign_in_failures_per_account;
  if (given("--sign-in-failures-per-address"))
    c.sign_in_failures_per_address = flags.sign_in_failures_per_address;
  if (given("--sign-in-window-seconds")) c.sign_in_window_seconds = flags.sign_in_window_seconds;
  if (given("--engine")) c.engine = flags.engine;
  if (given("--ssh-listen")) c.ssh_listen = flags.ssh_listen;
  GPUWERK_TRY(Validate(c));
  return c;
}

/// The first operator's password for `gpuwerk up`: made once, kept in DATA/operator-password
/// (mode 0600) so every run can print it.
std::string OperatorPassword(const std::filesystem::path& data_dir, core::Rng& rng) {
  const auto path = data_dir / "operator-password";
  std::ifstream in(path);
  std::string password;
  if (in && std::getline(in, password) && !password.empty()) return password;
  password = core::RandomToken(rng, 15);
  const mode_t old = ::umask(077);
  std::ofstream(path) << password << "\n";
  ::umask(old);
  return password;
}

int RunServer(const ServerConfig& config, bool up) {
  core::InitLogging(config.log_level);
  core::SystemClock clock;
  core::SodiumRng rng;
  sigset_t signals = BlockStopSignals();
  auto server = ServerApp::Start(config, clock, rng);
  if (!server) {
    std::fprintf(stderr, "gpuwerk: %s\n", server.error().message.c_str());
    return 1;
  }
  if (!config.operator_email.empty()) {
    auto made = (*server)->EnsureOperator(config.operator_email, config.operator_password);
    if (!made) {
      std::fprintf(stderr, "gpuwerk: cannot create the operator %s: %s\n",
                   config.operator_email.c_str(), made.error().message.c_str());
      return 1;
    }
    if (*made) spdlog::info("server: created the operator account {}", config.operator_email);
  }
#ifdef GPUWERK_WITH_AGENT
  std::unique_ptr<LocalPlatform> platform;
#endif
  if (up) {
#ifdef GPUWERK_WITH_AGENT
    auto started = LocalPlatform::Start({.engine = config.engine,
                                         .data_dir = config.data_dir,
                                         .instance_image = config.instance_image,
                                         .ssh_listen = config.ssh_listen},
                                        **server);
    if (!started) {
      std::fprintf(stderr, "gpuwerk: %s\n", started.error().message.c_str());
      (*server)->Stop();
      return 1;
    }
    platform = std::move(*started);
    if (platform->ssh_port() != 0 && config.ssh_domain.empty()) {
      (*server)->SetRelayAddress(platform->ssh_address(), platform->ssh_port());
    }
#endif
    const bool own_operator = config.operator_email.empty();
    const std::string email = own_operator ? "operator@gpuwerk.local" : config.operator_email;
    const std::string password =
        own_operator ? OperatorPassword(config.data_dir, rng) : config.operator_password;
    if (auto made = (*server)->EnsureOperator(email, password); !made) {
      std::fprintf(stderr, "gpuwerk: cannot create the operator: %s\n",
                   made.error().message.c_str());
      return 1;
    }
    auto still = (*server)->PasswordMatches(email, password);
    const std::string shown = !own_operator     ? "(password from your configuration)"
                              : still && *still ? "password: " + password
                                                : "(password changed since; use yours)";
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    const std::string data = std::filesystem::absolute(config.data_dir).lexically_normal().string();
    const std::string mail = config.mail == "smtp"
                                 ? "SMTP " + config.smtp_url
                                 : data + "/mail/new (Maildir; links are also printed below)";
#ifdef GPUWERK_WITH_AGENT
    const std::string engine = platform->engine_url() + " (" + platform->engine_origin() + ")";
    const std::string host =
        platform->host_name() + ", spark-1x" + (platform->has_gpu() ? "" : ", no GPU attached");
    const std::string ssh =
        platform->ssh_port() == 0
            ? std::string("(no relay)")
            : platform->ssh_address() + ":" + std::to_string(platform->ssh_port()) +
                  " (relay; log in with: ssh -p " + std::to_string(platform->ssh_port()) +
                  " <instance hostname>@" + platform->ssh_address() + ")";
#else
    const std::string engine = "(this build has no agent: GPUWERK_AGENT=OFF)";
    const std::string host = "none";
    const std::string ssh = "(no relay)";
#endif
    std::printf(
        "gpuwerk is up.\n"
        "  dashboard:  %s/\n"
        "  operator:   %s  %s\n"
        "  CLI:        %s login --url %s --email %s\n"
        "  engine:     %s\n"
        "  host:       %s\n"
        "  ssh:        %s\n"
        "  data:       %s\n"
        "  mail:       %s\n"
        "Press Ctrl-C to stop.\n",
        (*server)->base_url().c_str(), email.c_str(), shown.c_str(), ec ? "gpuwerk" : self.c_str(),
        (*server)->base_url().c_str(), email.c_str(), engine.c_str(), host.c_str(), ssh.c_str(),
        data.c_str(), mail.c_str());
    std::fflush(stdout);
  }
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("server: signal {} received, stopping", sig);
#ifdef GPUWERK_WITH_AGENT
  if (platform) platform->Stop();  // the agent first: it talks to the server
#endif
  (*server)->Stop();
  server->reset();
  spdlog::info("server: stopped");
  return 0;
}

}  // namespace
}  // namespace gpuwerk::app

int main(int argc, char** argv) {
  using namespace gpuwerk;
  core::InitCrypto();
  CLI::App app{"gpuwerk: a self-hostable GPU cloud"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuwerk 0.1.0");

  app::ServerConfig server_flags;
  std::string server_config_file;
  auto* server = app.add_subcommand("server", "run the control plane (API, dashboard, workers)");
  app::AddServerOptions(*server, server_flags, server_config_file);

  app::ServerConfig up_flags;
  std::string up_config_file;
  auto* up = app.add_subcommand("up", "run the whole platform on this machine");
  app::AddServerOptions(*up, up_flags, up_config_file);
  up->add_option("--ssh-listen", up_flags.ssh_listen,
                 "SSH relay address ADDR:PORT (default 127.0.0.1:2222; port 0 picks one)");
  up->add_option("--engine", up_flags.engine,
                 "container engine unix:///PATH (default: Docker's socket, else a podman service)");

  int exit_code = 0;
  cli::AddClientCommands(app, exit_code);
#ifdef GPUWERK_WITH_AGENT
  app::AddAgentCommand(app, exit_code);
#endif
  app::AddRelayCommand(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Prints help, version or the usage error (a mistyped verb with a suggestion).
    const int rc = cli::ReportUsageError(app, e, std::vector<std::string>(argv + 1, argv + argc),
                                         std::cout, std::cerr);
    return rc == 0 ? 0 : 2;
  }
  for (auto [cmd, flags, file, is_up] :
       {std::tuple{server, &server_flags, &server_config_file, false},
        std::tuple{up, &up_flags, &up_config_file, true}}) {
    if (!cmd->parsed()) continue;
    auto config = app::ResolveConfig(*cmd, *flags, *file);
    if (!config) {
      std::fprintf(stderr, "gpuwerk: %s\n", config.error().message.c_str());
      return 2;
    }
    return app::RunServer(*config, is_up);
  }
  return exit_code;
}
