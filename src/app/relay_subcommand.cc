#include "app/relay_subcommand.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "app/command_config.h"
#include "app/relay_config.h"
#include "core/ip_networks.h"
#include "core/logging.h"
#include "core/strings.h"
#include "protocol/api_client.h"
#include "relay/http_relay_authorizer.h"
#include "relay/http_relay_session_log.h"
#include "relay/http_relay_watch.h"
#include "relay/relay_command.h"
#include "relay/relay_session_log.h"

namespace gpuwerk::app {
namespace {

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
    spdlog::info("relay_session refused code={} user=\"{}\" key={} source={}", r.code, r.user,
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

int RunRelay(const RelayConfig& f) {
  if (auto url = protocol::CheckCredentialUrl(f.server_url); !url) {
    std::fprintf(stderr, "gpuwerk relay: --server: %s\n", url.error().message.c_str());
    return 2;
  }
  auto listen = ParseAddressPort(f.ssh_listen);
  if (!listen) {
    std::fprintf(stderr, "gpuwerk relay: --listen %s\n", listen.error().message.c_str());
    return 2;
  }
  auto trusted = core::IpNetworks::Parse(f.relay_trusted_proxies, "relay_trusted_proxies");
  if (!trusted) {
    std::fprintf(stderr, "gpuwerk relay: %s\n", trusted.error().message.c_str());
    return 2;
  }
  core::InitLogging(f.log_level);
  relay::RelayOptions options;
  options.trusted_proxies = std::move(*trusted);
  if (!options.trusted_proxies.empty()) {
    spdlog::info(
        "relay: connections from {} must start with a PROXY protocol header, whose client "
        "address is believed",
        fmt::join(options.trusted_proxies.cidrs(), ", "));
  }
  options.listen_address = listen->address;
  options.listen_port = listen->port;
  options.host_key_path = f.host_key;
  options.relay_key_path = f.relay_key;
  options.relay_ca_path = f.relay_ca;
  // Revocation (docs/ssh.md "Revocation"): access changes come pushed over the watch stream;
  // the backstop re-checks every open relay session in one batch every recheck_interval, and
  // fails closed after max_failed_rechecks failures in a row (the defaults of RelayOptions).
  options.recheck_interval = std::chrono::seconds(f.recheck_interval_seconds);
  options.max_failed_rechecks = f.max_failed_rechecks;
  // The relay's credential names it: the server files its relay sessions under that name (the
  // restart announcement's answer says it in the log).
  relay::HttpRelayAuthorizer authorizer(f.server_url, f.relay_token);
  relay::HttpRelaySessionLog reports({.server_url = f.server_url, .token = f.relay_token});
  LogRelaySessionLog lines;
  TeeRelaySessionLog log(lines, reports);
  spdlog::info("relay: reporting relay sessions to {}", core::BoundedPrintable(f.server_url));
  reports.Start();  // announces the restart first: the server closes what this relay left open
  std::unique_ptr<relay::HttpRelayWatch> watch;
  const int rc = relay::RunRelayUntilSignal(
      options, authorizer, log,
      [&](relay::Relay& relay) {
        watch = std::make_unique<relay::HttpRelayWatch>(
            relay::HttpRelayWatch::Options{.server_url = f.server_url, .token = f.relay_token},
            relay);
        watch->Start();
      },
      [&] {
        if (watch) watch->Stop();
      });
  reports.Stop();  // the relay has stopped: its last ends are queued; sends them (up to 5 s)
  return rc;
}

}  // namespace

void AddRelayCommand(CLI::App& app, int& exit_code) {
  AddConfiguredCommand<RelayConfig>(app, "relay", "Run the SSH relay (the front door to instances)",
                                    RelayOptions(), "GPUWERK_RELAY_CONFIG", RunRelay, exit_code);
}

}  // namespace gpuwerk::app
