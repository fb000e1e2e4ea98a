// The operator's verbs as an operator runs them against a real server: `gpuwerk admin
// gpu-types ls|set`, `gpuwerk admin hosts add|set-ssh|rm|link|unlink|ls`, `gpuwerk gpu-types`, a
// create of a type that is not online entering the queue, `admin invite` and `admin release-key`.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/integration/server_fixture.h"
#include "tests/support/run_command.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class CliAdminTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(app_->EnsureOperator("op@example.test", "operator password 1"));
    auto login =
        Gpuwerk("login --url " + app_->base_url() + " --email op@example.test --password-stdin",
                "operator password 1\n");
    ASSERT_EQ(login.exit_code, 0) << login.err;
    auto key = GenerateKey(dir_.path(), "laptop");
    auto add = Gpuwerk("keys add laptop " + key.private_path.string() + ".pub");
    ASSERT_EQ(add.exit_code, 0) << add.err;
  }
  CommandResult Gpuwerk(const std::string& args, const std::string& input = "") {
    return RunCommand(dir_.path(),
                      "env -u GPUWERK_URL -u GPUWERK_TOKEN GPUWERK_CONFIG_DIR='" +
                          (dir_.path() / "config").string() + "' " + GpuwerkBinary() + " " + args,
                      input);
  }
  /// One line on stderr ending in "(code)", exit 1.
  void ExpectFailure(const CommandResult& r, const std::string& code) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("(" + code + ")"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
};

TEST_F(CliAdminTest, GpuTypesLsAndSet) {
  auto ls = Gpuwerk("admin gpu-types ls");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("HOSTS/INSTANCE"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("spark-2x"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("1.50 USD"), std::string::npos) << ls.out;

  auto set = Gpuwerk("admin gpu-types set spark-1x --price-minor 80 --description 'One Spark'");
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("0.80 USD per hour"), std::string::npos) << set.out;
  auto made = Gpuwerk(
      "admin gpu-types set gb10-lite --hosts-per-instance 1 --price-minor 5 --currency eur --json");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(json::parse(made.out)["price"], json({{"amount_minor", 5}, {"currency", "eur"}}));

  ExpectFailure(Gpuwerk("admin gpu-types set spark-1x --currency dollars"), "invalid_currency");
  ExpectFailure(Gpuwerk("admin gpu-types set spark-9x --price-minor 10"), "invalid_field");
  ExpectFailure(Gpuwerk("admin gpu-types set spark-1x --hosts-per-instance 5"),
                "invalid_hosts_per_instance");
  EXPECT_EQ(Gpuwerk("admin gpu-types set spark-1x --price-minor ten").exit_code, 2);

  auto listed = Gpuwerk("admin gpu-types ls --json");
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto items = json::parse(listed.out);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0]["name"], "gb10-lite");
  EXPECT_EQ(items[1]["description"], "One Spark");
  EXPECT_EQ(items[1]["price"]["amount_minor"], 80);

  // People's view: price, online, queued.
  auto pub = Gpuwerk("gpu-types");
  ASSERT_EQ(pub.exit_code, 0) << pub.err;
  EXPECT_NE(pub.out.find("QUEUED"), std::string::npos) << pub.out;
  EXPECT_NE(pub.out.find("0.80 USD"), std::string::npos) << pub.out;
}

TEST_F(CliAdminTest, PairsLinkListUnlinkAndHostRemoval) {
  for (const char* h : {"node-a", "node-b"}) {
    ASSERT_EQ(Gpuwerk(std::string("admin hosts add ") + h + " --gpu-type spark-2x").exit_code, 0);
  }
  // Not online: a create enters the queue, and says so.
  auto create = Gpuwerk("instances create big --key laptop --gpu-type spark-2x");
  ASSERT_EQ(create.exit_code, 0) << create.err;
  EXPECT_NE(create.out.find("joined its queue at position 1"), std::string::npos) << create.out;

  ExpectFailure(Gpuwerk("admin hosts link node-a node-b=10.0.0.2"), "invalid_argument");
  EXPECT_EQ(Gpuwerk("admin hosts link node-a=10.0.0.1").exit_code, 2);  // two are needed
  ExpectFailure(Gpuwerk("admin hosts link node-a=10.0.0.1 node-b=nope"), "invalid_rail_address");
  auto link = Gpuwerk("admin hosts link node-a=10.0.0.1 node-b=10.0.0.2");
  ASSERT_EQ(link.exit_code, 0) << link.err;
  EXPECT_NE(link.out.find("node-a (node 0, rail 10.0.0.1) and node-b (node 1, rail 10.0.0.2)"),
            std::string::npos)
      << link.out;
  ExpectFailure(Gpuwerk("admin hosts link node-b=10.0.0.1 node-a=10.0.0.2"), "already_paired");

  auto ls = Gpuwerk("admin hosts ls");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("PAIR"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("node 0 with node-b (rail 10.0.0.1"), std::string::npos) << ls.out;
  auto hosts = json::parse(Gpuwerk("admin hosts ls --json").out);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[1]["pair"]["partner"], "node-a");
  // The table shows each host's id: what `admin audit --target` takes.
  EXPECT_NE(ls.out.find(hosts[0]["id"].get<std::string>()), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(" ID "), std::string::npos) << ls.out;

  ExpectFailure(Gpuwerk("admin hosts unlink nope"), "not_found");
  auto unlink = Gpuwerk("admin hosts unlink node-b");
  ASSERT_EQ(unlink.exit_code, 0) << unlink.err;
  EXPECT_NE(unlink.out.find("Unlinked pair hpr_"), std::string::npos) << unlink.out;

  auto rm = Gpuwerk("admin hosts rm node-a");
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_NE(rm.out.find("Removed host node-a"), std::string::npos) << rm.out;
  ExpectFailure(Gpuwerk("admin hosts rm node-a"), "not_found");
  EXPECT_EQ(json::parse(Gpuwerk("admin hosts ls --json").out).size(), 1u);
}

// Issue 12 finding 1: `admin hosts add --ssh-address ADDR --ssh-ports LOW-HIGH` and `admin hosts
// set-ssh`: the relay's upstream is what the operator registers. Bad values fail with the
// server's stable code and register nothing.
TEST_F(CliAdminTest, HostsAddAndSetSshTakeTheRelaysUpstreamAndRefuseBadValues) {
  ExpectFailure(Gpuwerk("admin hosts add h1 --gpu-type spark-1x --ssh-address=-oProxyCommand=x"),
                "invalid_ssh_address");
  ExpectFailure(
      Gpuwerk("admin hosts add h1 --gpu-type spark-1x --ssh-address '10.0.0.5 -oProxyCommand=x'"),
      "invalid_ssh_address");
  ExpectFailure(Gpuwerk("admin hosts add h1 --gpu-type spark-1x --ssh-address 10.0.0.5 "
                        "--ssh-ports 0-100"),
                "invalid_ssh_ports");
  ExpectFailure(Gpuwerk("admin hosts add h1 --gpu-type spark-1x --ssh-address 10.0.0.5 "
                        "--ssh-ports 1-70000"),
                "invalid_ssh_ports");
  ExpectFailure(Gpuwerk("admin hosts add h1 --gpu-type spark-1x --ssh-address 10.0.0.5 "
                        "--ssh-ports 2000-1000"),
                "invalid_ssh_ports");
  ExpectFailure(Gpuwerk("admin hosts add h1 --gpu-type spark-1x --ssh-address 10.0.0.5 "
                        "--ssh-ports lots"),
                "invalid_ssh_ports");
  EXPECT_EQ(json::parse(Gpuwerk("admin hosts ls --json").out).size(), 0u);

  auto add = Gpuwerk(
      "admin hosts add h1 --gpu-type spark-1x --ssh-address 10.0.0.5 --ssh-ports 32768-60999");
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_NE(add.out.find("sshd 10.0.0.5 ports 32768-60999"), std::string::npos) << add.out;
  EXPECT_EQ(add.err, "");
  auto bare = Gpuwerk("admin hosts add h2 --gpu-type spark-1x");
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_NE(bare.err.find("the relay refuses this host's instances until 'gpuwerk admin hosts "
                          "set-ssh h2 --ssh-address ADDR'"),
            std::string::npos)
      << bare.err;

  ExpectFailure(Gpuwerk("admin hosts set-ssh h2 --ssh-address=-x"), "invalid_ssh_address");
  ExpectFailure(Gpuwerk("admin hosts set-ssh nope --ssh-address 10.0.0.7"), "not_found");
  EXPECT_EQ(Gpuwerk("admin hosts set-ssh h2").exit_code, 2);  // --ssh-address is required
  auto set = Gpuwerk("admin hosts set-ssh h2 --ssh-address spark-h2.internal --ssh-ports 2222");
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out,
            "Host h2: the relay reaches its instances' sshd at spark-h2.internal ports "
            "2222-2222.\n");
  auto hosts = json::parse(Gpuwerk("admin hosts ls --json").out);
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0]["ssh_address"], "10.0.0.5");
  EXPECT_EQ(hosts[1]["ssh_ports"], json({{"low", 2222}, {"high", 2222}}));
  auto table = Gpuwerk("admin hosts ls");
  EXPECT_NE(table.out.find("SSHD"), std::string::npos) << table.out;
  // Docker inside as the host's agent says it (docs/docker-inside.md); "-" before any sync.
  EXPECT_NE(table.out.find("DOCKER INSIDE"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("10.0.0.5 ports 32768-60999"), std::string::npos) << table.out;
}

TEST_F(CliAdminTest, HostsLsFollowsPages) {
  for (int i = 0; i < 16; ++i) {
    auto add = Gpuwerk("admin hosts add host-" + std::to_string(100 + i) + " --gpu-type spark-1x");
    ASSERT_EQ(add.exit_code, 0) << add.err;
  }
  auto hosts = json::parse(Gpuwerk("admin hosts ls --json").out);
  ASSERT_EQ(hosts.size(), 16u);  // two pages on the server
  EXPECT_EQ(hosts[15]["name"], "host-115");
  auto table = Gpuwerk("admin hosts ls");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("host-115"), std::string::npos) << table.out;
}

// Issue 11: `gpuwerk admin invite EMAIL` mails an invitation whose link makes the account.
TEST_F(CliAdminTest, AdminInviteMailsALinkThatMakesTheAccount) {
  auto invite = Gpuwerk("admin invite dan@example.test");
  ASSERT_EQ(invite.exit_code, 0) << invite.err;
  EXPECT_EQ(invite.out.rfind("Invited dan@example.test: the mailed link", 0), 0u) << invite.out;
  const std::string link = LinkToken("dan@example.test", kAddressProofPath);
  ASSERT_FALSE(link.empty());
  auto dan = Browser();
  ASSERT_EQ(dan->PostJson("/api/v1/auth/prove-address/consume",
                          {{"token", link}, {"password", "dan password 1"}})
                .status,
            200);
  EXPECT_EQ(dan->Get("/api/v1/me").Json()["email_proven"], true);
  ExpectFailure(Gpuwerk("admin invite dan@example.test"), "account_exists");
  auto j = Gpuwerk("admin invite erin@example.test --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out)["email"], "erin@example.test");
}

TEST_F(CliAdminTest, AdminReleaseKeyFreesAKeyForItsHolder) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  const std::string bob_id = bob->Get("/api/v1/me").Json()["id"];
  auto key = GenerateKey(dir_.path(), "alice-key");
  ASSERT_EQ(
      bob->PostJson("/api/v1/ssh-keys", {{"name", "not-mine"}, {"public_key", key.public_line}})
          .status,
      201);
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}}),
      409, "key_taken");

  // The private key file is refused before anything is sent, as `keys add` refuses it.
  auto pasted = Gpuwerk("admin release-key " + key.private_path.string());
  ExpectFailure(pasted, "private_key_pasted");
  EXPECT_NE(pasted.err.find("Nothing was sent"), std::string::npos) << pasted.err;
  EXPECT_NE(pasted.err.find("Pass the matching .pub file instead (" + key.private_path.string() +
                            ".pub)"),
            std::string::npos)
      << pasted.err;
  EXPECT_EQ(pasted.err.find("exposed"), std::string::npos) << pasted.err;
  ExpectFailure(Gpuwerk("admin release-key " +
                        GenerateKey(dir_.path(), "nobody").private_path.string() + ".pub"),
                "not_found");
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 1);

  auto released = Gpuwerk("admin release-key " + key.private_path.string() + ".pub");
  ASSERT_EQ(released.exit_code, 0) << released.err;
  const std::string fingerprint = SshKeygenFingerprint(key.private_path.string() + ".pub");
  EXPECT_EQ(released.out.rfind("Released key " + fingerprint + " from account " + bob_id, 0), 0u)
      << released.out;
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 0);
  EXPECT_EQ(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}})
          .status,
      201);

  // --json prints the answer; standard input works as for `keys add`.
  ASSERT_EQ(alice
                ->Delete("/api/v1/ssh-keys/" +
                         alice->Get("/api/v1/ssh-keys").Json()["items"][0]["id"].get<std::string>())
                .status,
            204);
  ASSERT_EQ(bob->PostJson("/api/v1/ssh-keys", {{"name", "again"}, {"public_key", key.public_line}})
                .status,
            201);
  auto j = Gpuwerk("admin release-key - --json", key.public_line);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(json::parse(j.out)["former_owner_id"], bob_id);
  EXPECT_EQ(json::parse(j.out)["fingerprint"], fingerprint);
}

// Issue 11 MED-2 through the CLI: `gpuwerk keys claim NAME FILE` has the real ssh-keygen sign the
// server's challenge with the private key beside FILE and takes the key over from the account that
// registered it without proving it, cancelling its queue entry that held the key.
TEST_F(CliAdminTest, KeysClaimProvesPossessionAndTakesTheKeyFromASquatter) {
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  auto key = GenerateKey(dir_.path(), "op-desktop");
  auto squatted =
      bob->PostJson("/api/v1/ssh-keys", {{"name", "not-mine"}, {"public_key", key.public_line}});
  ASSERT_EQ(squatted.status, 201) << squatted.body;
  ASSERT_EQ(bob->PostJson("/api/v1/queue-entries", {{"name", "parked"},
                                                    {"ssh_key_id", squatted.Json()["id"]},
                                                    {"gpu_type", "spark-1x"}})
                .status,
            201);
  ExpectFailure(Gpuwerk("keys add desktop " + key.private_path.string() + ".pub"), "key_taken");
  ExpectFailure(Gpuwerk("keys claim desktop -"), "invalid_argument");

  auto claimed = Gpuwerk("keys claim desktop " + key.private_path.string() + ".pub");
  ASSERT_EQ(claimed.exit_code, 0) << claimed.err;
  const std::string fingerprint = SshKeygenFingerprint(key.private_path.string() + ".pub");
  EXPECT_EQ(claimed.out, "Claimed key desktop (" + fingerprint +
                             "): it was on another account that never proved it, and is yours "
                             "now.\n");
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 0);
  EXPECT_TRUE(bob->Get("/api/v1/queue-entries").Json()["items"].empty());
  auto ls = Gpuwerk("keys ls --json");
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find(fingerprint), std::string::npos) << ls.out;
  // Again: it is already ours and proven.
  auto again = Gpuwerk("keys claim desktop " + key.private_path.string() + ".pub");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("Proved key desktop"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace gpuwerk::testing

namespace gpuwerk::testing {
namespace {

// admin instances, admin queue, admin people [set-operator|clear-operator|sign-up-policy].
TEST_F(CliAdminTest, EveryonesInstancesQueueAndPeopleAndTheOperatorFlag) {
  auto none = Gpuwerk("admin instances");
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "No instances.\n");
  auto page = Gpuwerk("admin instances --status running --json");
  ASSERT_EQ(page.exit_code, 0) << page.err;
  EXPECT_EQ(json::parse(page.out)["total"], 0);
  ExpectFailure(Gpuwerk("admin instances --status sleeping"), "invalid_status");
  ExpectFailure(Gpuwerk("admin instances --before 'x y'"), "invalid_cursor");

  // spark-2x has no host online: joining its queue needs no card, and the operator sees it.
  ASSERT_EQ(Gpuwerk("queue join --gpu-type spark-2x trainer --key laptop").exit_code, 0);
  auto queue = Gpuwerk("admin queue");
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_NE(queue.out.find("POSITION"), std::string::npos) << queue.out;
  EXPECT_NE(queue.out.find("trainer"), std::string::npos) << queue.out;
  EXPECT_NE(queue.out.find("op@example.test"), std::string::npos) << queue.out;
  auto queue_json = Gpuwerk("admin queue --gpu-type spark-2x --json");
  ASSERT_EQ(queue_json.exit_code, 0) << queue_json.err;
  EXPECT_EQ(json::parse(queue_json.out)["items"][0]["position"], 1);

  ASSERT_EQ(Gpuwerk("admin invite bob@example.test").exit_code, 0);
  auto people = Gpuwerk("admin people");
  ASSERT_EQ(people.exit_code, 0) << people.err;
  EXPECT_NE(people.out.find("bob@example.test"), std::string::npos) << people.out;
  EXPECT_NE(people.out.find("OPERATOR"), std::string::npos) << people.out;
  auto set = Gpuwerk("admin people set-operator bob@example.test");
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "bob@example.test is an operator now.\n");
  // Newest first, but bob and the operator may have been made within one second (the order
  // then follows ids): find bob by address.
  auto listed = json::parse(Gpuwerk("admin people --json").out);
  ASSERT_EQ(listed["items"].size(), 2U) << listed.dump();
  const auto bob = std::find_if(listed["items"].begin(), listed["items"].end(),
                                [](const json& p) { return p["email"] == "bob@example.test"; });
  ASSERT_NE(bob, listed["items"].end()) << listed.dump();
  EXPECT_EQ((*bob)["is_operator"], true);
  auto cleared = Gpuwerk("admin people clear-operator bob@example.test --json");
  ASSERT_EQ(cleared.exit_code, 0) << cleared.err;
  EXPECT_EQ(json::parse(cleared.out)["is_operator"], false);
  ExpectFailure(Gpuwerk("admin people clear-operator op@example.test"), "last_operator");
  ExpectFailure(Gpuwerk("admin people set-operator nobody@example.test"), "not_found");

  auto policy = Gpuwerk("admin people sign-up-policy");
  ASSERT_EQ(policy.exit_code, 0) << policy.err;
  EXPECT_NE(policy.out.find("Sign-up policy: open."), std::string::npos) << policy.out;
}

}  // namespace
}  // namespace gpuwerk::testing
