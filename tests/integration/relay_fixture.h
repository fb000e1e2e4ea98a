#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "relay/relay.h"
#include "relay/ssh_key_file.h"
#include "tests/integration/server_fixture.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {

/// ServerTest with the pieces every relay test sets up (docs/ssh.md): an operator, alice with an
/// SSH key, a host whose sshd the relay reaches on 127.0.0.1, the host's agent syncs, relay
/// credentials, the relay CA and a relay's options under the test's directory. Each piece is a
/// call, so that a test takes the ones it needs; failures are gtest failures (callers check
/// HasFatalFailure() after the ones that ASSERT).
class RelayServerTest : public ServerTest {
 protected:
  /// Signs the operator in as `op_` ("op@example.test").
  void SignInOperator() {
    op_ = SignedInOperator();
    ASSERT_FALSE(HasFailure());
  }
  /// A new API token of the operator's ("gw_…"), for the CLI. Needs SignInOperator().
  std::string OperatorToken() {
    auto token = op_->PostJson("/api/v1/tokens", {{"name", "cli"}});
    EXPECT_EQ(token.status, 201) << token.body;
    return token.Json().value("token", "");
  }
  /// Signs alice up (`alice_`, with the tests' card) and registers a new ed25519 key of hers,
  /// named "laptop" (`alice_key_`, `alice_key_id_`, `alice_fp_`).
  void SignUpAliceWithKey() {
    alice_ = Browser();
    SignUp(*alice_, "alice@example.test");
    alice_key_ = GenerateKey(dir_.path(), "alice");
    auto key = alice_->PostJson("/api/v1/ssh-keys",
                                {{"name", "laptop"}, {"public_key", alice_key_.public_line}});
    ASSERT_EQ(key.status, 201) << key.body;
    alice_key_id_ = key.Json()["id"].get<std::string>();
    alice_fp_ = key.Json()["fingerprint"].get<std::string>();
  }
  /// Registers host `name` (GPU type spark-1x, no GPU required; its sshd on 127.0.0.1, unless
  /// `ssh` is false: none registered) as the operator and returns its agent token. Needs
  /// SignInOperator(). The host takes instances only after its first Sync().
  std::string AddHost(const std::string& name, bool ssh = true) {
    nlohmann::json body = {{"name", name}, {"gpu_type", "spark-1x"}, {"gpu_required", false}};
    if (ssh) body["ssh_address"] = "127.0.0.1";
    auto r = op_->PostJson("/api/v1/admin/hosts", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("token", "");
  }
  /// One agent sync of the host with agent token `token`, reporting `containers`.
  HttpResult Sync(const std::string& token,
                  const nlohmann::json& containers = nlohmann::json::array()) {
    HttpClient agent(app_->base_url());
    agent.SetBearer(token);
    return agent.PostJson("/api/v1/agent/sync",
                          {{"agent_version", "0.1.0"},
                           {"inventory", {{"addresses", nlohmann::json::array()}, {"cpus", 2}}},
                           {"engine", {{"ok", true}, {"error", ""}}},
                           {"containers", containers},
                           {"failures", nlohmann::json::array()}});
  }
  /// A running container of instance `id`, ready, its sshd on `ssh_port`, as an agent reports it.
  static nlohmann::json RunningContainer(const std::string& id, uint16_t ssh_port,
                                         const std::string& container_id = "c0") {
    return {{"instance_id", id},    {"node_index", 0},   {"container_id", container_id},
            {"state", "running"},   {"exit_code", 0},    {"started_at", ""},
            {"ssh_port", ssh_port}, {"ssh_ready", true}, {"restart_generation", 0},
            {"error", ""}};
  }
  /// Registers relay `name` as the operator and returns its credential ("gwr_…"). Needs
  /// SignInOperator().
  std::string RegisterRelay(const std::string& name) {
    auto r = op_->PostJson("/api/v1/admin/relays", {{"name", name}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("token", "");
  }
  /// Where a relay of this test keeps its keys.
  std::filesystem::path relay_dir() const { return dir_.path() / "relay"; }
  /// The relay CA in relay_dir() (made on first use, as the relay does at its start).
  core::Result<relay::SshKeyFile> RelayCa() {
    return relay::LoadOrCreateEd25519Key(relay_dir() / "relay_ca", "gpuwerk-relay-ca");
  }
  /// A relay's options: on 127.0.0.1, a port of its choosing, its keys in relay_dir().
  relay::RelayOptions LocalRelayOptions() const {
    relay::RelayOptions options;
    options.listen_address = "127.0.0.1";
    options.listen_port = 0;
    options.host_key_path = relay_dir() / "host_key";
    options.relay_key_path = relay_dir() / "relay_key";
    return options;
  }
  /// `ssh … USER@127.0.0.1` through the relay on `relay_port` with `key`, the stock client
  /// (no agent, no config, batch mode, this test's known_hosts); append a quoted command.
  std::string SshVia(uint16_t relay_port, const GeneratedKey& key, const std::string& user) const {
    return "ssh -F /dev/null -p " + std::to_string(relay_port) + " -i " +
           key.private_path.string() +
           " -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes"
           " -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=" +
           (dir_.path() / "known_hosts").string() + " " + user + "@127.0.0.1";
  }

  std::unique_ptr<HttpClient> op_, alice_;
  GeneratedKey alice_key_;
  std::string alice_key_id_, alice_fp_;
};

}  // namespace gpuwerk::testing
