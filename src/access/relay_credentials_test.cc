// Relay credentials (docs/ssh.md "The relay's API credential") in a real SQLite store: names,
// secrets stored hashed, authentication and its use recorded once a minute, revocation, `gpuwerk
// up`'s own credential rotated, audit events.
#include "access/relay_credentials.h"

#include <gtest/gtest.h>

#include "auth/account_service.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::access {
namespace {

using store::Transaction;

class RelayCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.Open());
    relays_ = std::make_unique<RelayCredentials>(*db_, clock_, rng_);
  }
  void TearDown() override {
    relays_.reset();
    db_.reset();
  }

  int64_t Count(const std::string& sql, std::initializer_list<store::Value> params = {}) {
    auto n = db_->Read([&](Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(sql, params));
      return row->Int(0);
    });
    return n ? *n : -1;
  }

  testing::TempDatabase db_;
  core::FakeClock clock_;
  core::SodiumRng rng_;
  std::unique_ptr<RelayCredentials> relays_;
};

TEST_F(RelayCredentialsTest, NamesAreCheckedAndLocalIsReserved) {
  for (std::string_view good : {"edge-1", "relay-1.example.com", "a", "0_x"}) {
    EXPECT_TRUE(CheckRelayName(good)) << good;
  }
  EXPECT_TRUE(CheckRelayName(std::string(kMaxRelayNameLength, 'a')));
  for (std::string_view bad :
       {"", "-edge", ".edge", "Edge", "edge 1", "edge\n1", "edge\x1b[31m", "edge/1", "\xc3\xa9"}) {
    auto checked = CheckRelayName(bad);
    ASSERT_FALSE(checked) << bad;
    EXPECT_EQ(checked.error().api_code, "invalid_name") << bad;
  }
  auto long_name = CheckRelayName(std::string(kMaxRelayNameLength + 1, 'a'));
  ASSERT_FALSE(long_name);
  EXPECT_EQ(long_name.error().api_code, "invalid_name");
  auto local = CheckRelayName("local");
  ASSERT_FALSE(local);
  EXPECT_EQ(local.error().api_code, "reserved_name");
}

TEST_F(RelayCredentialsTest, AddStoresTheHashAuthenticatesAndRevokes) {
  auto added = relays_->Add("per_op", "edge-1", "203.0.113.9");
  ASSERT_TRUE(added) << added.error().message;
  EXPECT_TRUE(added->secret.starts_with("gwr_"));
  EXPECT_EQ(added->secret.size(), 4u + 43u);  // 256 bits, base64url without padding
  EXPECT_EQ(added->credential.prefix, added->secret.substr(0, 12));
  EXPECT_TRUE(added->credential.id.starts_with("rly_"));
  EXPECT_EQ(added->credential.created_by, "per_op");
  // Only the hash is stored.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM relay_credentials WHERE token_hash = ?",
                  {auth::TokenHash(added->secret)}),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM relay_credentials WHERE token_hash = ?", {added->secret}),
            0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'relay_credential.add' AND "
                  "actor_id = 'per_op' AND target = ? AND source_address = '203.0.113.9'",
                  {added->credential.id}),
            1);

  auto who = relays_->Authenticate(added->secret);
  ASSERT_TRUE(who) << who.error().message;
  EXPECT_EQ(who->name, "edge-1");
  EXPECT_EQ(who->id, added->credential.id);
  EXPECT_EQ(who->last_used_at, clock_.NowUnix());
  for (std::string_view wrong :
       {std::string_view(""), std::string_view("gwr_nope"), std::string_view("gwt_x"),
        std::string_view(added->secret).substr(1)}) {
    auto refused = relays_->Authenticate(wrong);
    ASSERT_FALSE(refused) << wrong;
    EXPECT_EQ(refused.error().code, core::ErrorCode::kUnauthenticated);
  }

  // Its use is recorded at most once a minute.
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_EQ(relays_->Authenticate(added->secret)->last_used_at, clock_.NowUnix() - 30);
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_EQ(relays_->Authenticate(added->secret)->last_used_at, clock_.NowUnix());

  auto revoked = relays_->Revoke("per_op", "edge-1", "203.0.113.9");
  ASSERT_TRUE(revoked) << revoked.error().message;
  EXPECT_EQ(revoked->id, added->credential.id);
  auto after = relays_->Authenticate(added->secret);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, core::ErrorCode::kUnauthenticated);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'relay_credential.revoke' "
                  "AND target = ?",
                  {added->credential.id}),
            1);
  auto again = relays_->Revoke("per_op", "edge-1", "203.0.113.9");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "not_found");
  // The name may be registered again, with a new secret.
  auto readded = relays_->Add("per_op", "edge-1", "203.0.113.9");
  ASSERT_TRUE(readded) << readded.error().message;
  EXPECT_NE(readded->secret, added->secret);
}

TEST_F(RelayCredentialsTest, BadNamesAndDuplicatesStoreNothing) {
  ASSERT_TRUE(relays_->Add("per_op", "edge-1", "198.51.100.1"));
  auto duplicate = relays_->Add("per_op", "edge-1", "198.51.100.1");
  ASSERT_FALSE(duplicate);
  EXPECT_EQ(duplicate.error().api_code, "name_taken");
  EXPECT_EQ(duplicate.error().code, core::ErrorCode::kAlreadyExists);
  for (std::string_view bad : {"", "local", "a\x01", "Edge-2"}) {
    auto refused = relays_->Add("per_op", bad, "198.51.100.1");
    ASSERT_FALSE(refused) << bad;
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM relay_credentials"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action LIKE 'relay_credential.%'"), 1);
}

TEST_F(RelayCredentialsTest, ListsByNameInPages) {
  for (int i = 0; i < 17; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "edge-%02d", 16 - i);
    ASSERT_TRUE(relays_->Add("per_op", name, "198.51.100.1"));
  }
  auto first = relays_->List(1);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->total, 17);
  EXPECT_EQ(first->pages, 2);
  ASSERT_EQ(first->items.size(), 15u);
  EXPECT_EQ(first->items[0].name, "edge-00");
  auto second = relays_->List(2);
  ASSERT_EQ(second->items.size(), 2u);
  EXPECT_EQ(second->items[1].name, "edge-16");
  auto bad = relays_->List(0);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().api_code, "invalid_page");
}

TEST_F(RelayCredentialsTest, LocalIsIssuedOnceAndRotatedOnEveryStart) {
  auto first = relays_->IssueLocal("system");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->credential.name, "local");
  EXPECT_EQ(first->credential.created_by, "");
  ASSERT_TRUE(relays_->Authenticate(first->secret));
  auto second = relays_->IssueLocal("system");
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->credential.id, first->credential.id);
  EXPECT_NE(second->secret, first->secret);
  EXPECT_FALSE(relays_->Authenticate(first->secret));  // the old secret stopped working
  EXPECT_EQ(relays_->Authenticate(second->secret)->name, "local");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM relay_credentials"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM audit_events WHERE action = 'relay_credential.rotate'"), 1);
  // An operator cannot take the name.
  auto taken = relays_->Add("per_op", "local", "198.51.100.1");
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().api_code, "reserved_name");
}

}  // namespace
}  // namespace gpuwerk::access
