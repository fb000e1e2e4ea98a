// SshKeyRegistry on a real SQLite store: a public key belongs to one account at most. A
// second account's add is refused as `key_taken` without saying whose it is and stores nothing;
// concurrent adds leave exactly one owner; the unique index refuses what a check missed; the
// migration that brought the index keeps each key's first registration; an operator releases a key
// from whichever account holds it.
#include "keys/ssh_key_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "keys/public_key.h"
#include "keys/ssh_key_table.h"
#include "store/sqlite_database.h"
#include "tests/support/ssh_keygen.h"
#include "tests/support/temp_database.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::keys {
namespace {

using store::Transaction;

/// A store whose first write transaction does not see the rows of `ssh_keys` (its reads of that
/// table answer nothing): the schedule of two adds where each checks before the other commits,
/// which PostgreSQL under READ COMMITTED allows and SQLite's one-writer-at-a-time does not.
class BlindFirstCheckDatabase final : public store::Database {
 public:
  explicit BlindFirstCheckDatabase(store::Database& inner) : inner_(inner) {}
  core::Result<std::unique_ptr<Transaction>> Begin(store::TxMode mode) override {
    GPUWERK_ASSIGN_OR_RETURN(auto tx, inner_.Begin(mode));
    const bool blind = mode == store::TxMode::kWrite && writes_++ == 0;
    return std::unique_ptr<Transaction>(new BlindTransaction(std::move(tx), blind, *this));
  }
  std::string_view Backend() const override { return inner_.Backend(); }

  std::atomic<int> blinded_reads{0};
  std::atomic<int> refused_inserts{0};

 private:
  class BlindTransaction final : public Transaction {
   public:
    BlindTransaction(std::unique_ptr<Transaction> inner, bool blind, BlindFirstCheckDatabase& db)
        : inner_(std::move(inner)), blind_(blind), db_(db) {}
    core::Result<std::vector<store::Row>> Query(std::string_view sql,
                                                std::initializer_list<store::Value> p) override {
      if (blind_ && sql.find("FROM ssh_keys") != std::string_view::npos) {
        ++db_.blinded_reads;
        return std::vector<store::Row>();
      }
      return inner_->Query(sql, p);
    }
    core::Result<int64_t> Exec(std::string_view sql,
                               std::initializer_list<store::Value> p) override {
      auto r = inner_->Exec(sql, p);
      if (!r && sql.starts_with("INSERT INTO ssh_keys") && store::IsUniqueViolation(r.error())) {
        ++db_.refused_inserts;
      }
      return r;
    }
    core::Result<void> ExecScript(std::string_view sql) override { return inner_->ExecScript(sql); }
    core::Result<void> Commit() override { return inner_->Commit(); }

   private:
    std::unique_ptr<Transaction> inner_;
    bool blind_;
    BlindFirstCheckDatabase& db_;
  };

  store::Database& inner_;
  std::atomic<int> writes_{0};
};

class SshKeyRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.Open());
    registry_.emplace(*db_, clock_, rng_);
    for (int i = 0; i < 8; ++i) AddPerson("per_" + std::to_string(i));
    key_ = testing::GenerateKey(keys_dir_.path(), "a2");
    ASSERT_FALSE(key_.public_line.empty());
  }
  void AddPerson(const std::string& id) {
    ASSERT_TRUE(db_->Write([&](Transaction& tx) -> core::Result<void> {
      const std::string email = id + "@x.test";
      GPUWERK_TRY(
          tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?,?,?,?)",
                  {id, email, email, int64_t{1}}));
      return {};
    }));
  }
  int64_t Count(const std::string& sql) {
    auto n = db_->Read([&](Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql));
      return row->Int(0);
    });
    EXPECT_TRUE(n) << n.error().message;
    return n.value_or(-1);
  }
  int64_t KeysOf(const std::string& person_id) {
    auto page = registry_->List(person_id, 1);
    EXPECT_TRUE(page) << page.error().message;
    return page ? page->total : -1;
  }

  testing::TempDatabase db_;
  testing::TempDir keys_dir_;
  core::FakeClock clock_;
  core::SodiumRng rng_;
  std::optional<SshKeyRegistry> registry_;
  testing::GeneratedKey key_;
};

TEST_F(SshKeyRegistryTest, AnotherAccountsKeyIsRefusedAsKeyTakenWithoutSayingWhoseAndNotStored) {
  auto first = registry_->Add("per_0", "a-laptop", key_.public_line, "192.0.2.1");
  ASSERT_TRUE(first) << first.error().message;
  // The same key, as B would paste it: another comment, another name, CRLF.
  std::string line = key_.public_line;
  line = line.substr(0, line.rfind(' ')) + " b-copy\r\n";
  auto taken = registry_->Add("per_1", "stolen-a-pub", line, "192.0.2.2");
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, core::ErrorCode::kAlreadyExists);
  EXPECT_EQ(taken.error().api_code, "key_taken");
  EXPECT_NE(taken.error().message.find("another gpuwerk account"), std::string::npos);
  // New-user trial: if the key is really theirs, an operator can release it.
  EXPECT_NE(taken.error().message.find("an operator can release it from the other account "
                                       "(gpuwerk admin release-key FILE)"),
            std::string::npos)
      << taken.error().message;
  for (const std::string& secret : {std::string("per_0"), std::string("a-laptop"),
                                    std::string("per_0@x.test"), std::string("a2@test")}) {
    EXPECT_EQ(taken.error().message.find(secret), std::string::npos) << secret;
    EXPECT_EQ(taken.error().details.dump().find(secret), std::string::npos) << secret;
  }
  EXPECT_EQ(KeysOf("per_1"), 0);
  EXPECT_EQ(KeysOf("per_0"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM ssh_keys"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'ssh_key.add'"), 1);
  // Her own second add of it stays `key_exists`, naming her key; another key is fine for B.
  auto again = registry_->Add("per_0", "again", key_.public_line, "192.0.2.1");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "key_exists");
  auto own = testing::GenerateKey(keys_dir_.path(), "b1");
  EXPECT_TRUE(registry_->Add("per_1", "stolen-a-pub", own.public_line, "192.0.2.2"));
}

// An operator's release (docs/ssh-keys.md "A key someone else registered first") finds the key by
// fingerprint in any form, deletes it through the delete's own check (R-5: refused while something
// of the holder's holds it) and audits the former owner.
TEST_F(SshKeyRegistryTest, ReleaseDeletesAsDeleteDoesAndAuditsTheFormerOwner) {
  std::vector<std::string> holding = {"web"};
  SshKeyRegistry registry(
      *db_, clock_, rng_,
      [&](Transaction&, const std::string& person_id, const std::string&) -> core::Result<KeyUse> {
        KeyUse use;
        if (person_id == "per_1") use.instances = holding;
        return use;
      });
  ASSERT_TRUE(registry.Add("per_1", "not-mine", key_.public_line, "192.0.2.2"));
  // The operator pastes it as RFC 4716 (ssh-keygen -e), as PuTTYgen users have it.
  const std::string pub = key_.private_path.string() + ".pub";
  std::string rfc4716;
  if (FILE* f = ::popen(("ssh-keygen -e -f '" + pub + "' 2>/dev/null").c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) rfc4716 += buf;
    ::pclose(f);
  }
  ASSERT_NE(rfc4716.find("BEGIN SSH2 PUBLIC KEY"), std::string::npos);

  auto in_use = registry.Release("per_7", rfc4716, "192.0.2.7");
  ASSERT_FALSE(in_use);
  EXPECT_EQ(in_use.error().api_code, "key_in_use");
  EXPECT_EQ(in_use.error().details["instances"], nlohmann::json::array({"web"}));
  // New-user trial: the operator cannot "delete the instances" of another account; the message
  // names the instances and their account and says who can clear them.
  EXPECT_EQ(in_use.error().details["owner_id"], "per_1");
  EXPECT_EQ(in_use.error().message,
            "This key is attached to instance web of account per_1, the account that registered "
            "it. Only that account can delete them (gpuwerk instances rm NAME) and leave the "
            "queue (gpuwerk queue leave NAME): no admin verb deletes another person's instance. "
            "Ask its owner to, then release the key again.");
  EXPECT_EQ(KeysOf("per_1"), 1);

  auto pasted = registry.Release("per_7", key_.private_text, "192.0.2.7");
  ASSERT_FALSE(pasted);
  EXPECT_EQ(pasted.error().api_code, "private_key_pasted");
  auto unknown = registry.Release(
      "per_7", testing::GenerateKey(keys_dir_.path(), "nobody").public_line, "192.0.2.7");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().api_code, "not_found");
  EXPECT_EQ(KeysOf("per_1"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'ssh_key.release'"), 0);

  holding.clear();
  auto released = registry.Release("per_7", rfc4716, "192.0.2.7");
  ASSERT_TRUE(released) << released.error().message;
  EXPECT_EQ(released->person_id, "per_1");
  EXPECT_EQ(released->fingerprint, testing::SshKeygenFingerprint(pub));
  EXPECT_EQ(KeysOf("per_1"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'ssh_key.release' AND "
                  "actor_id = 'per_7' AND detail LIKE '%\"former_owner_id\":\"per_1\"%'"),
            1);
  EXPECT_TRUE(registry.Add("per_0", "laptop", key_.public_line, "192.0.2.1"));
}

TEST_F(SshKeyRegistryTest, ConcurrentAddsOfOneKeyLeaveExactlyOneOwner) {
  std::vector<std::thread> threads;
  std::vector<core::Result<SshKey>> results(8, std::unexpected(core::Error()));
  std::atomic<bool> go{false};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      results[i] = registry_->Add("per_" + std::to_string(i), "k", key_.public_line, "192.0.2.1");
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  int won = 0;
  std::string owner;
  for (int i = 0; i < 8; ++i) {
    if (results[i]) {
      ++won;
      owner = results[i]->person_id;
    } else {
      EXPECT_EQ(results[i].error().api_code, "key_taken") << results[i].error().message;
    }
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM ssh_keys"), 1);
  for (int i = 0; i < 8; ++i) {
    const std::string person = "per_" + std::to_string(i);
    EXPECT_EQ(KeysOf(person), person == owner ? 1 : 0) << person;
  }
}

TEST_F(SshKeyRegistryTest, AddThatLostTheRaceAtTheUniqueIndexAnswersKeyTaken) {
  ASSERT_TRUE(registry_->Add("per_0", "a-laptop", key_.public_line, "192.0.2.1"));
  BlindFirstCheckDatabase blind(*db_);
  SshKeyRegistry registry(blind, clock_, rng_);
  auto lost = registry.Add("per_1", "stolen-a-pub", key_.public_line, "192.0.2.2");
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().api_code, "key_taken") << lost.error().message;
  EXPECT_GT(blind.blinded_reads.load(), 0);    // its first check saw nothing,
  EXPECT_EQ(blind.refused_inserts.load(), 1);  // the index refused the row,
  EXPECT_EQ(KeysOf("per_1"), 0);               // and nothing of it stayed
  EXPECT_EQ(Count("SELECT COUNT(*) FROM ssh_keys"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'ssh_key.add'"), 1);
}

TEST_F(SshKeyRegistryTest, StoreRefusesASecondAccountForOneFingerprint) {
  auto added = registry_->Add("per_0", "a-laptop", key_.public_line, "192.0.2.1");
  ASSERT_TRUE(added);
  SshKey copy = *added;
  copy.id = "key_copy";
  copy.person_id = "per_1";
  auto inserted = db_->Write(
      [&](Transaction& tx) -> core::Result<void> { return SshKeyTable::Insert(tx, copy); });
  ASSERT_FALSE(inserted);
  EXPECT_TRUE(store::IsUniqueViolation(inserted.error())) << inserted.error().message;
}

/// Migration 10 on a store from before it, where one key sits on three accounts: the first
/// registration (created_at, then id) keeps it, the later rows go, other keys stay.
TEST_F(SshKeyRegistryTest, MigrationKeepsEachKeysFirstRegistration) {
  // Back to the schema before migration 10, then rows as the old code allowed them.
  ASSERT_TRUE(db_->Write([&](Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.ExecScript("DROP INDEX ssh_keys_one_account"));
    GPUWERK_TRY(tx.Exec("DELETE FROM schema_migrations WHERE version = 10"));
    const std::map<std::string, std::pair<std::string, int64_t>> rows = {
        {"key_b", {"per_1", 100}},  // first
        {"key_a", {"per_2", 200}},  // later, though its id sorts first
        {"key_c", {"per_3", 100}},  // same second as key_b, larger id
    };
    for (const auto& [id, who] : rows) {
      GPUWERK_TRY(tx.Exec(
          "INSERT INTO ssh_keys (id, person_id, name, key_type, bits, public_key, fingerprint, "
          "created_at) VALUES (?, ?, 'k', 'ssh-ed25519', 256, 'line', 'SHA256:dup', ?)",
          {id, who.first, who.second}));
    }
    GPUWERK_TRY(tx.Exec(
        "INSERT INTO ssh_keys (id, person_id, name, key_type, bits, public_key, fingerprint, "
        "created_at) VALUES ('key_own', 'per_2', 'other', 'ssh-ed25519', 256, 'line', "
        "'SHA256:own', 300)"));
    return {};
  }));
  ASSERT_TRUE(store::Migrate(*db_));
  auto left = db_->Read([&](Transaction& tx) -> core::Result<std::vector<std::string>> {
    GPUWERK_ASSIGN_OR_RETURN(auto rows, tx.Query("SELECT id FROM ssh_keys ORDER BY id"));
    std::vector<std::string> ids;
    for (const auto& r : rows) ids.push_back(r.Text("id"));
    return ids;
  });
  ASSERT_TRUE(left) << left.error().message;
  EXPECT_EQ(*left, (std::vector<std::string>{"key_b", "key_own"}));
  auto owner =
      db_->Read([&](Transaction& tx) { return SshKeyTable::FindByFingerprint(tx, "SHA256:dup"); });
  ASSERT_TRUE(owner && *owner);
  EXPECT_EQ((*owner)->person_id, "per_1");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM schema_migrations WHERE version = 10"), 1);
}

}  // namespace
}  // namespace gpuwerk::keys
