// SSH keys over real HTTP: parsing end to end, isolation between accounts, one
// account per public key (`key_taken`), and a pasted private key never stored, echoed or logged
// (C03).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
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

/// `ssh-keygen -Y sign -n <ns> -f <private_key>` over `message`, as `gpuwerk keys claim` runs it
/// on the holder's machine: the armored signature, "" when ssh-keygen failed.
std::string SignWithSshKeygen(const std::filesystem::path& dir,
                              const std::filesystem::path& private_key, const std::string& ns,
                              const std::string& message) {
  static int n = 0;
  const std::filesystem::path file = dir / ("challenge-" + std::to_string(++n));
  {
    std::ofstream out(file, std::ios::binary);
    out << message;
  }
  const std::string cmd = "ssh-keygen -q -Y sign -n '" + ns + "' -f '" + private_key.string() +
                          "' '" + file.string() + "' </dev/null >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return "";
  return ReadFile(file.string() + ".sig");
}

// Issue 11 MED-2 (key squatting): bob registers alice's PUBLIC key first and parks it in a queue
// entry, so that alice gets key_taken and an operator's release answers key_in_use. Alice proves
// that she holds the private key (a server challenge signed by the real ssh-keygen in namespace
// gpuwerk-key-claim) and takes the key over: bob's key row goes, his queue entry holding it is
// cancelled and he is mailed, everything is audited, and nobody can take the proven key again.
TEST_F(SshKeysApiTest, AHolderWhoProvesPossessionTakesTheKeyFromASquatterAndItsQueueEntry) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto bob = Browser();
  SignUp(*bob, "bob@example.test");
  const std::string bob_id = bob->Get("/api/v1/me").Json()["id"];
  auto key = GenerateKey(dir_.path(), "alice-laptop");
  auto other = GenerateKey(dir_.path(), "mallory");
  ASSERT_FALSE(key.public_line.empty());
  ASSERT_FALSE(other.public_line.empty());
  auto squatted =
      bob->PostJson("/api/v1/ssh-keys", {{"name", "not-mine"}, {"public_key", key.public_line}});
  ASSERT_EQ(squatted.status, 201) << squatted.body;
  auto parked = bob->PostJson(
      "/api/v1/queue-entries",
      {{"name", "parked"}, {"ssh_key_id", squatted.Json()["id"]}, {"gpu_type", "spark-1x"}});
  ASSERT_EQ(parked.status, 201) << parked.body;
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys", {{"name", "laptop"}, {"public_key", key.public_line}}),
      409, "key_taken");

  auto challenge_for = [&](HttpClient& who, const std::string& public_key) {
    auto r = who.PostJson("/api/v1/ssh-keys/claim-challenge", {{"public_key", public_key}});
    EXPECT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.Json()["namespace"], "gpuwerk-key-claim");
    return r.Json()["challenge"].get<std::string>();
  };
  auto claim = [&](HttpClient& who, const std::string& challenge, const std::string& signature) {
    return who.PostJson("/api/v1/ssh-keys/claim", {{"name", "laptop"},
                                                   {"public_key", key.public_line},
                                                   {"challenge", challenge},
                                                   {"signature", signature}});
  };
  auto count = [&](const std::string& sql) -> int64_t {
    auto n = app_->database().Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    return n ? *n : -1;
  };

  // Refused, each using its challenge up: another key's signature; then the right signature
  // on the used challenge; the right key in another namespace; a signature over another
  // challenge; another person's challenge; a challenge issued for another key; garbage.
  const std::string c1 = challenge_for(*alice, key.public_line);
  ExpectProblem(claim(*alice, c1,
                      SignWithSshKeygen(dir_.path(), other.private_path, "gpuwerk-key-claim", c1)),
                400, "invalid_signature");
  const std::string good_for_c1 =
      SignWithSshKeygen(dir_.path(), key.private_path, "gpuwerk-key-claim", c1);
  ASSERT_NE(good_for_c1.find("BEGIN SSH SIGNATURE"), std::string::npos);
  ExpectProblem(claim(*alice, c1, good_for_c1), 400, "invalid_challenge");
  const std::string c2 = challenge_for(*alice, key.public_line);
  ExpectProblem(claim(*alice, c2, SignWithSshKeygen(dir_.path(), key.private_path, "git", c2)), 400,
                "invalid_signature");
  const std::string c3 = challenge_for(*alice, key.public_line);
  ExpectProblem(claim(*alice, c3, good_for_c1), 400, "invalid_signature");
  const std::string c4 = challenge_for(*alice, key.public_line);
  ExpectProblem(
      claim(*bob, c4, SignWithSshKeygen(dir_.path(), key.private_path, "gpuwerk-key-claim", c4)),
      400, "invalid_challenge");
  const std::string c5 = challenge_for(*alice, other.public_line);
  ExpectProblem(
      claim(*alice, c5, SignWithSshKeygen(dir_.path(), key.private_path, "gpuwerk-key-claim", c5)),
      400, "invalid_challenge");
  const std::string c6 = challenge_for(*alice, key.public_line);
  ExpectProblem(claim(*alice, c6, "-----BEGIN SSH SIGNATURE-----\n!!\n-----END SSH SIGNATURE-----"),
                400, "invalid_signature");
  // A challenge expires after 10 minutes.
  const std::string late = challenge_for(*alice, key.public_line);
  const std::string late_sig =
      SignWithSshKeygen(dir_.path(), key.private_path, "gpuwerk-key-claim", late);
  clock_.Advance(std::chrono::minutes(10));
  ExpectProblem(claim(*alice, late, late_sig), 400, "invalid_challenge");
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 1) << "nothing changed yet";
  EXPECT_EQ(bob->Get("/api/v1/queue-entries").Json()["items"].size(), 1u);
  EXPECT_EQ(count("SELECT COUNT(*) FROM audit_events WHERE action LIKE 'ssh_key.claim%'"), 0);

  // The proof: the key is alice's, proven; bob's row and his queue entry holding it are gone.
  const std::string c7 = challenge_for(*alice, key.public_line);
  const std::string good =
      SignWithSshKeygen(dir_.path(), key.private_path, "gpuwerk-key-claim", c7);
  auto claimed = claim(*alice, c7, good);
  ASSERT_EQ(claimed.status, 201) << claimed.body;
  EXPECT_EQ(claimed.Json()["taken_over"], true);
  EXPECT_EQ(claimed.Json()["proven"], true);
  EXPECT_EQ(claimed.Json()["fingerprint"],
            SshKeygenFingerprint(key.private_path.string() + ".pub"));
  EXPECT_EQ(alice->Get("/api/v1/ssh-keys").Json()["total"], 1);
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 0);
  EXPECT_TRUE(bob->Get("/api/v1/queue-entries").Json()["items"].empty());
  EXPECT_EQ(count("SELECT COUNT(*) FROM queue_entries WHERE status = 'cancelled'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM audit_events WHERE action = 'ssh_key.claim'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM audit_events WHERE action = 'ssh_key.claimed_away'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM audit_events WHERE action = 'queue.cancel'"), 1);
  EXPECT_EQ(count("SELECT COUNT(*) FROM ssh_keys WHERE proven_at IS NOT NULL"), 1);
  bool told = false;
  for (const auto& m : Mails("bob@example.test", 2)) {
    told = told || (m.subject.find("was claimed") != std::string::npos &&
                    m.text_body.find("parked") != std::string::npos);
  }
  EXPECT_TRUE(told) << "bob is told, with the queue entry that was cancelled";
  // Single use: the good signature on its challenge is refused the second time.
  ExpectProblem(claim(*alice, c7, good), 400, "invalid_challenge");

  // Nobody takes a proven key: bob cannot re-add it, and another holder of the private key
  // (a copy) who proves it too is refused.
  ExpectProblem(
      bob->PostJson("/api/v1/ssh-keys", {{"name", "again"}, {"public_key", key.public_line}}), 409,
      "key_taken");
  const std::string c8 = challenge_for(*bob, key.public_line);
  ExpectProblem(
      claim(*bob, c8, SignWithSshKeygen(dir_.path(), key.private_path, "gpuwerk-key-claim", c8)),
      409, "key_taken");
  EXPECT_EQ(bob->Get("/api/v1/ssh-keys").Json()["total"], 0);
  // Proving one's own key again is fine and changes nothing.
  const std::string c9 = challenge_for(*alice, key.public_line);
  auto again =
      claim(*alice, c9, SignWithSshKeygen(dir_.path(), key.private_path, "gpuwerk-key-claim", c9));
  EXPECT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["taken_over"], false);
}

// A key its account proved by a signed challenge is marked proven; an account that holds a key
// it never proved keeps it until someone proves it (registering a key stays as it was).
TEST_F(SshKeysApiTest, ChallengesAreBoundedPerPerson) {
  auto alice = Browser();
  SignUp(*alice, "alice@example.test");
  auto key = GenerateKey(dir_.path(), "k");
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(alice->PostJson("/api/v1/ssh-keys/claim-challenge", {{"public_key", key.public_line}})
                  .status,
              201);
  }
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys/claim-challenge", {{"public_key", key.public_line}}), 429,
      "rate_limited");
  clock_.Advance(std::chrono::minutes(10));
  EXPECT_EQ(
      alice->PostJson("/api/v1/ssh-keys/claim-challenge", {{"public_key", key.public_line}}).status,
      201);
  ExpectProblem(
      alice->PostJson("/api/v1/ssh-keys/claim-challenge", {{"public_key", key.private_text}}), 400,
      "private_key_pasted");
}

}  // namespace
}  // namespace gpuwerk::testing
