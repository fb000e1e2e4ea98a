#include "app/relay_subcommand.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <string>

#include "core/logging.h"
#include "relay/http_relay_authorizer.h"
#include "relay/http_relay_session_log.h"
#include "relay/relay_command.h"
#include "relay/relay_session_log.h"

namespace gpuwerk::app {
namespace {

struct RelayFlags {
  std::string server;
  std::string token;
  std::string listen = "0.0.0.0:2222";
  std::string host_key = "/var/lib/gpuwerk/relay/host_key";
  std::string relay_key = "/var/lib/gpuwerk/relay/relay_key";
  std::string log_level = "info";
  std::string name;  ///< empty: the machine's host name
};

/// The machine's host name, "relay" when it has none.
std::string HostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "relay";
  return buf;
}

/// Relay sessions into the relay's log, one structured line each (R-10: who, key, instance,
/// source, start, end, bytes).
class LogRelaySessionLog final : public relay::RelaySessionLog {
 public:
  void OnStart(const relay::RelaySessionRecord& r) override {
    spdlog::info(
        "relay_session start id={} person={} key={} instance={} hostname={} login={} source={}",
        r.id, r.person_id, r.key_fingerprint, r.instance_id, r.hostname, r.login, r.source_address);
  }
  void OnEnd(const relay::RelaySessionRecord& r) override {
    spdlog::info(
        "relay_session end id={} person={} instance={} source={} bytes_from_client={} "
        "bytes_to_client={} reason=\"{}\"",
        r.id, r.person_id, r.instance_id, r.source_address, r.bytes_from_client, r.bytes_to_client,
        r.end_reason);
  }
  void OnRefused(const relay::RelayRefusalRecord& r) override {
    spdlog::info("relay_session refused code={} user={} key={} source={}", r.code, r.user,
                 r.key_fingerprint, r.source_address);
  }
};

/// Every record to both logs: the relay's own log lines, and the reports to the server.
class TeeRelaySessionLog final : public relay::RelaySessionLog {
 public:
  TeeRelaySessionLog(relay::RelaySessionLog& a, relay::RelaySessionLog& b) : a_(a), b_(b) {}
  void OnStart(const relay::RelaySessionRecord& r) override {
    a_.OnStart(r);
    b_.OnStart(r);
  }
  void OnEnd(const relay::RelaySessionRecord& r) override {
    a_.OnEnd(r);
    b_.OnEnd(r);
  }
  void OnRefused(const relay::RelayRefusalRecord& r) override {
    a_.OnRefused(r);
    b_.OnRefused(r);
  }

 private:
  relay::RelaySessionLog& a_;
  relay::RelaySessionLog& b_;
};

int RunRelay(const RelayFlags& f) {
  const size_t colon = f.listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(f.listen.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (colon == std::string::npos || port < 0 || port > 65535) {
    std::fprintf(stderr, "gpuwerk relay: --listen must be ADDR:PORT, got '%s'\n", f.listen.c_str());
    return 2;
  }
  core::InitLogging(f.log_level);
  relay::RelayOptions options;
  options.listen_address = f.listen.substr(0, colon);
  if (options.listen_address.starts_with('[') && options.listen_address.ends_with(']')) {
    options.listen_address = options.listen_address.substr(1, options.listen_address.size() - 2);
  }
  options.listen_port = static_cast<uint16_t>(port);
  options.host_key_path = f.host_key;
  options.relay_key_path = f.relay_key;
  // Open relay sessions ask the server again every second, so that a deleted instance's (or a
  // person's whose access ended) end within about a second here too. The cost: one
  // POST /api/v1/relay/authorize per open relay session per second (docs/ssh.md).
  options.reauthorize_interval = std::chrono::seconds(1);
  const std::string name = f.name.empty() ? HostName() : f.name;
  if (name == "local") {
    std::fprintf(stderr,
                 "gpuwerk relay: the name 'local' belongs to gpuwerk up's own relay; pass "
                 "--name\n");
    return 2;
  }
  relay::HttpRelayAuthorizer authorizer(f.server, f.token);
  relay::HttpRelaySessionLog reports(
      {.server_url = f.server, .token = f.token, .relay_name = name});
  LogRelaySessionLog lines;
  TeeRelaySessionLog log(lines, reports);
  spdlog::info("relay: reporting relay sessions to {} as relay '{}'", f.server, name);
  reports.Start();  // announces the restart first: the server closes what this relay left open
  const int rc = relay::RunRelayUntilSignal(options, authorizer, log);
  reports.Stop();  // the relay has stopped: its last ends are queued; sends them (up to 5 s)
  return rc;
}

}  // namespace

void AddRelayCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<RelayFlags>();
  auto* cmd = app.add_subcommand("relay", "run the SSH relay (the front door to instances)");
  cmd->add_option("--server", flags->server, "the control plane's URL")
      ->envname("GPUWERK_SERVER_URL")
      ->required();
  cmd->add_option("--token", flags->token, "an operator's API token the relay asks with")
      ->envname("GPUWERK_RELAY_TOKEN")
      ->required();
  cmd->add_option("--listen", flags->listen, "SSH address ADDR:PORT (default 0.0.0.0:2222)")
      ->envname("GPUWERK_SSH_LISTEN");
  cmd->add_option("--host-key", flags->host_key, "the relay's SSH host key (created once)")
      ->envname("GPUWERK_HOST_KEY");
  cmd->add_option("--relay-key", flags->relay_key,
                  "the key the relay logs in to instances with (created once)")
      ->envname("GPUWERK_RELAY_KEY");
  cmd->add_option("--name", flags->name,
                  "this relay's name in relay session records, unique per server (default: the "
                  "machine's host name)")
      ->envname("GPUWERK_RELAY_NAME");
  cmd->add_option("--log-level", flags->log_level, "trace, debug, info, warn or error")
      ->envname("GPUWERK_LOG_LEVEL");
  cmd->callback([flags, &exit_code] { exit_code = RunRelay(*flags); });
}

}  // namespace gpuwerk::app
