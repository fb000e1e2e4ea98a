// The `gpuwerk` binary: server, up, and the client verbs (DESIGN.md "Command line").
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#ifdef GPUWERK_WITH_AGENT
#include "agent/probe_process.h"
#include "app/agent_command.h"
#include "app/local_platform.h"
#endif
#include "app/admin_copy_database.h"
#include "app/admin_migrate.h"
#include "app/command_config.h"
#include "app/relay_subcommand.h"
#include "app/server_app.h"
#include "app/server_config.h"
#include "cli/commands.h"
#include "core/clock.h"
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

/// The system clock shifted by a fixed number of seconds: the test-only server setting
/// `test_clock_offset_seconds` (an end-to-end test restarts the real server a month ahead to close
/// that month). Thread-safe.
class OffsetClock final : public core::Clock {
 public:
  explicit OffsetClock(int64_t offset_seconds) : offset_(offset_seconds) {}
  TimePoint Now() const override { return std::chrono::system_clock::now() + offset_; }

 private:
  std::chrono::seconds offset_;
};

int RunServer(const ServerConfig& config, bool up) {
  core::InitLogging(config.log_level);
  OffsetClock clock(config.test_clock_offset_seconds);
  if (config.test_clock_offset_seconds != 0) {
    spdlog::warn(
        "server: the clock runs {} s ahead of the system's (test_clock_offset_seconds: test "
        "suites only)",
        config.test_clock_offset_seconds);
  }
  core::SodiumRng rng;
  sigset_t signals = BlockStopSignals();
  auto server = ServerApp::Start(config, clock, rng);
  if (!server) {
    std::fprintf(stderr, "gpuwerk: %s\n", server.error().message.c_str());
    return 1;
  }
  // The configured operator was made by ServerApp::Start, before /healthz answered.
#ifdef GPUWERK_WITH_AGENT
  std::unique_ptr<LocalPlatform> platform;
#endif
  if (up) {
#ifdef GPUWERK_WITH_AGENT
    auto started = LocalPlatform::Start({.engine = config.engine,
                                         .data_dir = config.data_dir,
                                         .instance_image = config.instance_image,
                                         .ssh_listen = config.ssh_listen,
                                         .relay_memory_limit_mib = config.relay_memory_limit_mib,
                                         .relay_trusted_proxies = config.relay_trusted_proxies,
                                         .log_level = config.log_level,
                                         .docker_inside = config.docker_inside,
                                         .instance_shm_bytes = config.instance_shm_bytes},
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
    // R-14: a fresh `up` can launch at once: its operator gets a manual payment method.
    auto card = (*server)->RecordLocalOperatorCard(email);
    if (!card) {
      std::fprintf(stderr, "gpuwerk: cannot record the operator's payment method: %s\n",
                   card.error().message.c_str());
      return 1;
    }
    const std::string billing_line = UpBillingLine(config, *card, email);
    auto still = (*server)->PasswordMatches(email, password);
    const std::string shown = !own_operator     ? "(password from your configuration)"
                              : still && *still ? "password: " + password
                                                : "(password changed since; use yours)";
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    const std::string data = std::filesystem::absolute(config.data_dir).lexically_normal().string();
    const std::string mail_to = (*server)->mail_transport() == mail::MailTransport::kSmtp
                                    ? "SMTP " + config.smtp_url
                                    : data + "/mail/new (Maildir; links are also printed below)";
#ifdef GPUWERK_WITH_AGENT
    const std::string engine = platform->engine_url() + " (" + platform->engine_origin() + ")";
    const std::string host =
        platform->host_name() + ", spark-1x" + (platform->has_gpu() ? "" : ", no GPU attached") +
        ", docker inside: " + platform->docker_inside() +
        (platform->docker_inside() == "privileged"
             ? " (a person in an instance is root on this machine: one tenant at a time; "
               "docs/docker-inside.md)"
             : "");
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
        "  billing:    %s\n"
        "Press Ctrl-C to stop.\n",
        (*server)->base_url().c_str(), email.c_str(), shown.c_str(), ec ? "gpuwerk" : self.c_str(),
        (*server)->base_url().c_str(), email.c_str(), engine.c_str(), host.c_str(), ssh.c_str(),
        data.c_str(), mail_to.c_str(), billing_line.c_str());
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

/// For an unknown option given to `server`, `up`, `agent` or `relay` (CLI11 names the extras in
/// reverse, without the command), one line naming it in the command's words and the closest
/// declared flag; "" for other errors or commands (the CLI's own reporting takes those).
std::string UnknownOptionMessage(const CLI::App& app, const CLI::ParseError& error,
                                 const std::vector<std::string>& args) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr) return "";
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.size() != 1) return "";
  const CLI::App& cmd = *parsed.front();
  static constexpr std::string_view kCommands[] = {"server", "up", "agent", "relay"};
  if (std::ranges::find(kCommands, cmd.get_name()) == std::end(kCommands)) return "";
  for (const std::string& arg : args) {
    if (!arg.starts_with("--")) continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (cmd.get_option_no_throw(name) != nullptr) continue;
    std::string closest;
    size_t best = 4;  // suggest only within 3 edits
    for (const CLI::Option* o : cmd.get_options()) {
      for (const std::string& flag : o->get_lnames()) {
        const size_t d = cli::EditDistance(name, "--" + flag);
        if (d < best) {
          best = d;
          closest = "--" + flag;
        }
      }
    }
    // The CLI's usage-error style (cli::ReportUsageError): what is wrong, which help to read.
    return "gpuwerk: unknown option " + name +
           (closest.empty() ? "" : " (did you mean " + closest + "?)") + "; see `gpuwerk " +
           cmd.get_name() + " --help`";
  }
  return "";
}

}  // namespace
}  // namespace gpuwerk::app

int main(int argc, char** argv) {
  using namespace gpuwerk;
#ifdef GPUWERK_WITH_AGENT
  // The agent's confined login probe (agent/probe_process.h): internal, not in --help; started by
  // the agent with a bare environment and no descriptors but stdin, stdout and stderr.
  if (argc >= 2 && std::string_view(argv[1]) == agent::kLoginProbeSubcommand) {
    return agent::LoginProbeMain(std::vector<std::string>(argv + 2, argv + argc));
  }
#endif
  core::InitCrypto();
  CLI::App app{"gpuwerk: a self-hostable GPU cloud"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuwerk 0.1.0");

  int exit_code = 0;
  auto run_server = [](bool up) {
    return [up](const app::ServerConfig& config) {
      if (auto valid = app::Validate(config); !valid) {
        std::fprintf(stderr, "gpuwerk: %s\n", valid.error().message.c_str());
        return 2;
      }
      return app::RunServer(config, up);
    };
  };
  app::AddConfiguredCommand<app::ServerConfig>(
      app, "server", "Run the control plane (API, dashboard, workers)", app::ServerOptions(),
      "GPUWERK_CONFIG", run_server(false), exit_code);
  app::AddConfiguredCommand<app::ServerConfig>(app, "up", "Run the whole platform on this machine",
                                               app::UpOptions(), "GPUWERK_CONFIG", run_server(true),
                                               exit_code);
  cli::AddClientCommands(app, exit_code);
  // The admin verbs that open the store themselves rather than calling the API.
  app::AddAdminMigrateCommand(*app.get_subcommand("admin"), exit_code);
  app::AddAdminCopyDatabaseCommand(*app.get_subcommand("admin"), exit_code);
#ifdef GPUWERK_WITH_AGENT
  app::AddAgentCommand(app, exit_code);
#endif
  app::AddRelayCommand(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (const std::string unknown = app::UnknownOptionMessage(app, e, args); !unknown.empty()) {
      std::fprintf(stderr, "%s\n", unknown.c_str());
      return 2;
    }
    // Prints help, version or the usage error (a mistyped verb with a suggestion).
    const int rc = cli::ReportUsageError(app, e, args, std::cout, std::cerr);
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
