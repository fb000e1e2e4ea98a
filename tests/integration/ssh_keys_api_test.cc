// SSH keys over real HTTP: parsing end to end, isolation between accounts, one
// account per public key (`key_taken`), and a pasted private key never stored, echoed or logged
// (C03).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "tests/integration/server_fixture.h"
#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {
namespace {

using nlohmann::json;

class SshKeysApiTest : public ServerTest {
 protected:
  void SetUp() override {
    log_sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    spdlog::default_logger()->sinks().push_back(log_sink_);
    spdlog::set_level(spdlog::level::trace);
    ServerTest::SetUp();
  }
  void TearDown() override {
    ServerTest::TearDown();
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), log_sink_), sinks.end());
  }
  std::ostringstream log_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> log_sink_;
};

TEST_F(SshKeysApiTest, AddListDeleteWithSshKeygenFingerprints) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  for (auto [type, bits] : {std::pair{"ed25519", 0}, {"ecdsa", 384}, {"rsa", 2048}}) {
    auto key = GenerateKey(dir_.path(), std::string("k-") + type, type, bits);
    ASSERT_FALSE(key.public_line.empty());
    auto r = alice->PostJson("/api/v1/ssh-keys", {{"name", std::string("laptop-") + type},
                                                  {"public_key", key.public_line}});
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.Json()["fingerprint"], SshKeygenFingerprint(key.private_path.string() + ".pub"));
    EXPECT_EQ(r.Json()["public_key"].get<std::string>().back(), '\n');
  }
  auto list = alice->Get("/api/v1/ssh-keys");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.Json()["total"], 3);
  EXPECT_EQ(list.Json()["page"], 1);
  EXPECT_EQ(list.Json()["pages"], 1);
  const std::string id = list.Json()["items"][0]["id"];
  EXPECT_EQ(alice->Delete("/api/v1/ssh-keys/" + id).status, 204);
  ExpectProblem(alice->Delete("/api/v1/ssh-keys/" + id), 404, "not_found");
  EXPECT_EQ(alice->Get("/api/v1/ssh-keys").Json()["total"], 2);
}

TEST_F(SshKeysApiTest, NamesAndKeysAreUniquePerAccount) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto k1 = GenerateKey(dir_.path(), "one");
  auto k2 = GenerateKey(dir_.path(), "two");
  ASSERT_EQ(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "macbook"}, {"public_key", k1.public_line}})
          .status,
      201);
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "macbook"}, {"public_key", k2.public_line}}),
      409, "name_taken");
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "again"}, {"public_key", k1.public_line}}), 409,
      "key_exists");
  // Another person may use the same name.
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  EXPECT_EQ(bob->PostJson("/api/v1/ssh-keys", {{"name", "macbook"}, {"public_key", k2.public_line}})
                .status,
            201);
}

TEST_F(SshKeysApiTest, AnotherAccountsPublicKeyIsRefusedAsKeyTakenAndNotStored) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto key = GenerateKey(dir_.path(), "a2");
  ASSERT_EQ(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}})
          .status,
      201);
  // Bob pastes Alice's public key (public keys are public: github.com/<user>.keys).
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  auto r = bob->PostJson("/api/v1/ssh-keys",
                         {{"name", "stolen-a-pub"}, {"public_key", key.public_line}});
  ExpectProblem(r, 409, "key_taken");
  for (const char* secret : {"alice", "laptop", "a2@test"}) {
    EXPECT_EQ(r.body.find(secret), std::string::npos) << secret << " in " << r.body;
  }
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 0);
  EXPECT_EQ(alice->Get("/api/v1/ssh-keys").Json()["total"], 1);
}

// docs/ssh-keys.md "A key someone else registered first": the first registration keeps a key,
// and an operator releases it for its real holder (POST /api/v1/admin/ssh-keys/release).
TEST_F(SshKeysApiTest, AnOperatorReleasesAKeyAnotherAccountRegisteredFirst) {
  ASSERT_TRUE(app_->EnsureOperator("op@example.test", "operator password 1"));
  auto op = Browser();
  ASSERT_EQ(op->PostJson("/api/v1/auth/login",
                         {{"email", "op@example.test"}, {"password", "operator password 1"}})
                .status,
            200);
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  const std::string bob_id = bob->Get("/api/v1/me").Json()["id"];
  auto key = GenerateKey(dir_.path(), "alice-laptop");
  ASSERT_FALSE(key.public_line.empty());
  auto taken =
      bob->PostJson("/api/v1/ssh-keys", {{"name", "not-mine"}, {"public_key", key.public_line}});
  ASSERT_EQ(taken.status, 201) << taken.body;
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}}),
      409, "key_taken");

  auto audited = [&](const std::string& action) -> int64_t {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row, tx.QueryOne("SELECT COUNT(*) FROM audit_events WHERE action = ?", {action}));
      return row->Int(0);
    });
    return n ? *n : -1;
  };
  const std::string release = "/api/v1/admin/ssh-keys/release";
  // Only operators; strict JSON; a private key is refused, never echoed, and changes nothing.
  ExpectProblem(alice->PostJson(release, {{"public_key", key.public_line}}), 403, "forbidden");
  ExpectProblem(bob->PostJson(release, {{"public_key", key.public_line}}), 403, "forbidden");
  ExpectProblem(op->PostJson(release, {{"public_key", key.public_line}, {"owner", "x"}}), 400,
                "invalid_field");
  auto pasted = op->PostJson(release, {{"public_key", key.private_text}});
  ExpectProblem(pasted, 400, "private_key_pasted");
  EXPECT_EQ(pasted.body.find("PRIVATE KEY-----\n"), std::string::npos);
  ExpectProblem(
      op->PostJson(release, {{"public_key", GenerateKey(dir_.path(), "nobody").public_line}}), 404,
      "not_found");
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 1) << "nothing changed";
  EXPECT_EQ(audited("ssh_key.release"), 0);

  // The operator pastes the key as it came, e.g. with CRLF line ends.
  std::string crlf = key.public_line;
  crlf.insert(crlf.size() - 1, "\r");
  auto released = op->PostJson(release, {{"public_key", crlf}});
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(released.Json()["fingerprint"],
            SshKeygenFingerprint(key.private_path.string() + ".pub"));
  EXPECT_EQ(released.Json()["former_owner_id"], bob_id);
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 0);
  EXPECT_EQ(audited("ssh_key.release"), 1);
  auto detail = app_->database().Read([&](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(
        auto row, tx.QueryOne("SELECT detail FROM audit_events WHERE action = 'ssh_key.release'"));
    return row->Text("detail");
  });
  ASSERT_TRUE(detail);
  auto d = json::parse(*detail);
  EXPECT_EQ(d["former_owner_id"], bob_id);
  EXPECT_EQ(d["fingerprint"], released.Json()["fingerprint"]);

  // Released once: no account has it now.
  ExpectProblem(op->PostJson(release, {{"public_key", key.public_line}}), 404, "not_found");

  EXPECT_EQ(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}})
          .status,
      201);
}

TEST_F(SshKeysApiTest, SecondAccountCannotSeeOrDeleteTheFirstsKeys) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto key = GenerateKey(dir_.path(), "alice");
  auto added =
      alice->PostJson("/api/v1/ssh-keys", {{"name", "work"}, {"public_key", key.public_line}});
  ASSERT_EQ(added.status, 201);
  const std::string id = added.Json()["id"];

  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 0);
  ExpectProblem(bob->Delete("/api/v1/ssh-keys/" + id), 404, "not_found");
  EXPECT_EQ(alice->Get("/api/v1/ssh-keys").Json()["total"], 1);
  ExpectProblem(Browser()->Get("/api/v1/ssh-keys"), 401, "unauthenticated");
}

TEST_F(SshKeysApiTest, C03_PastedPrivateKeyIsRefusedNeverStoredNorLogged) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  for (const char* format : {"", "-m PEM", "-m PKCS8"}) {
    auto key = GenerateKey(dir_.path(), std::string("priv") + (format[0] ? format + 3 : ""), "rsa",
                           2048, format);
    ASSERT_FALSE(key.private_text.empty());
    auto r =
        alice->PostJson("/api/v1/ssh-keys", {{"name", "oops"}, {"public_key", key.private_text}});
    ExpectProblem(r, 400, "private_key_pasted");
    // Not echoed: no line of the secret appears in the answer.
    std::istringstream lines(key.private_text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.size() > 20 && line.find("-----") == std::string::npos) {
        EXPECT_EQ(r.body.find(line), std::string::npos);
        EXPECT_EQ(log_.str().find(line), std::string::npos) << "secret reached the log";
      }
    }
  }
  EXPECT_EQ(alice->Get("/api/v1/ssh-keys").Json()["total"], 0);
  // Nor in the database file.
  std::string db =
      ReadFile(config_.data_dir / "gpuwerk.db") + ReadFile(config_.data_dir / "gpuwerk.db-wal");
  EXPECT_EQ(db.find("PRIVATE KEY"), std::string::npos);
}

TEST_F(SshKeysApiTest, BadKeysGetTheirOwnCodes) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "x"}, {"public_key", "ssh-ed25519 AAAAC3Nza"}}),
      400, "invalid_public_key");
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "x"}, {"public_key", std::string(60000, 'z')}}),
      400, "invalid_public_key");
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", ""}, {"public_key", "ssh-ed25519 AAAA"}}), 400,
      "invalid_name");
  EXPECT_EQ(alice->Get("/api/v1/ssh-keys").Json()["total"], 0);
}

}  // namespace
}  // namespace gpuwerk::testing
