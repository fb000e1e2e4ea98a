// Starting `gpuwerk relay` for an end-to-end test: the one way the e2e suites that go through the
// relay (instances, isolation, cluster) start it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "tests/support/child_process.h"
#include "tests/support/e2e_engine.h"
#include "tests/support/eventually.h"
#include "tests/support/http_client.h"
#include "tests/support/net.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {

/// Starts `relay` as `gpuwerk relay` against the server at `server_url`: a relay credential named
/// `name` registered by the operator `op`, its host key and key in `dir`, and a CA made here
/// (`dir`/relay_ca) whose public line (no trailing newline) is written to `*ca_line`; the agents
/// must be given it with --relay-ca. It listens on loopback at `*port`, or when `*port` is 0 on a
/// free port written to `*port` (a caller that must name the port to the server before the relay
/// can start picks it first with FreePort()); its log goes to `dir`/relay.log. Failures are gtest
/// fatal failures: callers check HasFatalFailure() after it.
inline void StartE2eRelay(HttpClient& op, const std::string& name, const std::string& server_url,
                          const std::filesystem::path& dir, ChildProcess& relay,
                          std::string* ca_line, int* port) {
  auto token = op.PostJson("/api/v1/admin/relays", {{"name", name}});
  ASSERT_EQ(token.status, 201) << token.body;
  CommandResult keygen =
      RunCommand(dir, "ssh-keygen -q -t ed25519 -N '' -C gpuwerk-relay-ca -f relay_ca");
  ASSERT_EQ(keygen.exit_code, 0) << keygen.err;
  *ca_line = ReadFile(dir / "relay_ca.pub");
  while (!ca_line->empty() && ca_line->back() == '\n') ca_line->pop_back();
  if (*port == 0) *port = FreePort();
  ASSERT_TRUE(relay.Start(
      {GpuwerkBinary(), "relay", "--server", server_url, "--listen",
       "127.0.0.1:" + std::to_string(*port), "--host-key", (dir / "relay_host_key").string(),
       "--relay-key", (dir / "relay_key").string(), "--relay-ca", (dir / "relay_ca").string()},
      CleanEnvWith("GPUWERK_RELAY_TOKEN", token.Json()["token"]), dir / "relay.log"))
      << relay.error();
  const int p = *port;
  ASSERT_TRUE(Eventually([&] { return !relay.Running() || PortOpen("127.0.0.1", p); },
                         std::chrono::seconds(30)));
  ASSERT_TRUE(relay.Running()) << Tail(dir / "relay.log");
}

}  // namespace gpuwerk::testing
