#include "auth/account_service.h"

#include <gtest/gtest.h>

#include "auth/email_address.h"
#include "auth/password_hasher.h"
#include "auth/person_table.h"
#include "auth/rate_limiter.h"
#include "core/logging.h"
#include "store/sqlite_database.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::auth {
namespace {

TEST(EmailAddressTest, NormalisesAndRefuses) {
  auto a = ParseEmailAddress("  Alice@Example.TEST \r\n");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->display, "Alice@Example.TEST");
  EXPECT_EQ(a->normalised, "alice@example.test");
  for (const char* bad : {"", "alice", "@example.test", "alice@", "a@b", "a b@example.test",
                          "a@@example.test", "a@example.test\r\nBcc: x@y.z"}) {
    auto r = ParseEmailAddress(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().api_code, "invalid_email");
  }
}

TEST(PasswordHasherTest, Argon2idRoundTrip) {
  core::InitCrypto();
  PasswordHasher hasher(HashCost::kTestOnlyMinimum);
  auto h = hasher.Hash("correct horse");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->rfind("$argon2id$", 0), 0u);
  EXPECT_EQ(hasher.Verify(*h, "correct horse"), true);
  EXPECT_EQ(hasher.Verify(*h, "correct hors"), false);
  EXPECT_FALSE(PasswordHasher::CheckPolicy("short"));
  EXPECT_TRUE(PasswordHasher::CheckPolicy("long enough"));
}

TEST(PasswordHasherTest, WithEverySlotInUseItRefusesAtOnceInsteadOfWaiting) {
  core::InitCrypto();
  core::ConcurrencyLimit slots(1);
  PasswordHasher hasher(HashCost::kTestOnlyMinimum, &slots);
  auto h = hasher.Hash("correct horse");
  ASSERT_TRUE(h);
  EXPECT_EQ(slots.in_use(), 0) << "a hash gives its slot back";
  {
    auto held = slots.TryAcquire();
    ASSERT_TRUE(held);
    auto busy = hasher.Hash("correct horse");
    ASSERT_FALSE(busy);
    EXPECT_EQ(busy.error().code, core::ErrorCode::kUnavailable);  // 503
    EXPECT_EQ(busy.error().api_code, "server_busy");
    EXPECT_EQ(busy.error().details["retry_after_seconds"], 1);
    auto verify = hasher.Verify(*h, "correct horse");
    ASSERT_FALSE(verify);
    EXPECT_EQ(verify.error().api_code, "server_busy");
  }
  EXPECT_EQ(hasher.Verify(*h, "correct horse"), true);
}

TEST(ConcurrencyLimitTest, HandsOutAtMostMaxSlotsAndTakesThemBack) {
  core::ConcurrencyLimit limit(2);
  auto a = limit.TryAcquire();
  auto b = limit.TryAcquire();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(limit.TryAcquire());
  EXPECT_EQ(limit.in_use(), 2);
  a.reset();
  EXPECT_EQ(limit.in_use(), 1);
  auto c = limit.TryAcquire();
  EXPECT_TRUE(c);
  auto moved = std::move(*c);
  c.reset();
  EXPECT_EQ(limit.in_use(), 2) << "a moved slot is still held";
}

class AccountServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::InitCrypto();
    ASSERT_TRUE(db_.Open());
    outbox_ = std::make_unique<mail::Outbox>(*db_, clock_, rng_);
    AccountOptions options;
    options.sign_in_failures_per_account.limit = 3;
    options.sign_in_failures_per_account.window = std::chrono::seconds(60);
    options.remove_ssh_keys = [this](store::Transaction&, const std::string& person_id) {
      keys_removed_for_.push_back(person_id);
      return core::Result<int64_t>(2);
    };
    accounts_ = std::make_unique<AccountService>(*db_, clock_, rng_, hasher_, *outbox_, options);
  }
  int64_t Count(const char* table) {
    return *db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(std::string("SELECT COUNT(*) FROM ") + table));
      return row->Int(0);
    });
  }
  /// A column that orders a table's rows as they were inserted: SQLite's rowid; on PostgreSQL
  /// the inserting transaction's id (the outbox rows here are never updated, which would change
  /// it).
  std::string InsertionOrder() const {
    return db_->Backend() == "postgresql" ? "xmin::text::bigint" : "rowid";
  }
  /// The token of the newest link mailed to `to` whose URL has `path`; "" when none.
  std::string LastLinkToken(const std::string& to, const std::string& path) {
    auto bodies = *db_->Read([&](store::Transaction& tx) -> core::Result<std::vector<std::string>> {
      GPUWERK_ASSIGN_OR_RETURN(auto rows,
                               tx.Query(std::string("SELECT text_body FROM outbox_mails WHERE "
                                                    "to_address = ? ORDER BY created_at, ") +
                                            InsertionOrder(),
                                        {to}));
      std::vector<std::string> out;
      for (const auto& row : rows) out.push_back(row.Text(0));
      return out;
    });
    std::string token;
    for (const auto& body : bodies) {
      const size_t at = body.find(path + "?token=");
      if (at == std::string::npos) continue;
      const size_t start = at + path.size() + 7;
      token = body.substr(start, body.find_first_of(" \r\n", start) - start);
    }
    return token;
  }
  /// Signs `email` up and proves it with the mailed link, setting `password`.
  SignIn SignUpProven(const std::string& email, const std::string& password = "password1") {
    auto up = accounts_->SignUp(email, password, caller_);
    EXPECT_TRUE(up) << up.error().message;
    auto in =
        accounts_->ProveAddress(LastLinkToken(email, "/auth/prove-address"), password, caller_);
    EXPECT_TRUE(in) << in.error().message;
    return in ? *in : SignIn{};
  }
  std::vector<std::string> keys_removed_for_;  ///< whom remove_ssh_keys was called for
  core::FakeClock clock_;
  core::SodiumRng rng_;
  core::ConcurrencyLimit hash_slots_{1};  ///< a test holds it to see that nothing hashes
  PasswordHasher hasher_{HashCost::kTestOnlyMinimum, &hash_slots_};
  testing::TempDatabase db_;
  std::unique_ptr<mail::Outbox> outbox_;
  std::unique_ptr<AccountService> accounts_;
  Caller caller_{.address = "192.0.2.1"};
};

TEST_F(AccountServiceTest, SignUpIsAuditedAndSessionsAreStoredHashed) {
  ASSERT_TRUE(accounts_->SignUp("alice@example.test", "password1", caller_));
  EXPECT_EQ(Count("sign_in_sessions"), 0) << "sign-up itself signs nobody in";
  EXPECT_EQ(Count("outbox_mails"), 1) << "the address-proof link";
  auto s = accounts_->ProveAddress(LastLinkToken("alice@example.test", "/auth/prove-address"),
                                   "password1", caller_);
  ASSERT_TRUE(s) << s.error().message;
  auto who = accounts_->AuthenticateSession(s->session_token);
  ASSERT_TRUE(who);
  EXPECT_EQ(who->email, "alice@example.test");
  auto stored = *db_->Read([&](store::Transaction& tx) -> core::Result<std::string> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT token_hash FROM sign_in_sessions"));
    return row->Text(0);
  });
  EXPECT_NE(stored, s->session_token);
  EXPECT_EQ(stored, TokenHash(s->session_token));
  EXPECT_EQ(Count("audit_events"), 3);  // sign_up + address_proven + sign_in
}

// Sign-up answers alike for a new address, an unproven account's and a proven account's; only
// the mail differs: a proof link, a fresh proof link, a notice (issue 11: no enumeration).
TEST_F(AccountServiceTest, SignUpNeverTellsWhetherTheAddressHasAnAccount) {
  SignUpProven("alice@example.test", "password1");
  const std::string alice_link = LastLinkToken("alice@example.test", "/auth/prove-address");
  ASSERT_TRUE(accounts_->SignUp("bob@example.test", "password2", caller_));
  const std::string bob_first = LastLinkToken("bob@example.test", "/auth/prove-address");
  const int64_t persons = Count("persons");
  auto again = accounts_->SignUp("ALICE@example.test", "other password", caller_);
  ASSERT_TRUE(again) << again.error().message;
  auto unproven = accounts_->SignUp("bob@example.test", "other password", caller_);
  ASSERT_TRUE(unproven) << unproven.error().message;
  EXPECT_EQ(Count("persons"), persons) << "no second account";
  // Alice's password is unchanged, she got no new link, and she was told.
  EXPECT_TRUE(accounts_->SignInWithPassword("alice@example.test", "password1", caller_));
  EXPECT_EQ(LastLinkToken("alice@example.test", "/auth/prove-address"), alice_link);
  // Bob's unproven account got a fresh link, which voided the first.
  const std::string bob_second = LastLinkToken("bob@example.test", "/auth/prove-address");
  ASSERT_NE(bob_second, bob_first);
  auto stale = accounts_->ProveAddress(bob_first, "bob password 3", caller_);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().api_code, "invalid_link");
  EXPECT_TRUE(accounts_->ProveAddress(bob_second, "bob password 3", caller_));
  auto notices = *db_->Read([&](store::Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM outbox_mails WHERE "
                                                   "subject LIKE '%tried to sign up%'"));
    return row->Int(0);
  });
  EXPECT_EQ(notices, 1);
}

TEST_F(AccountServiceTest, FailedSignInsAreCountedAndLimited) {
  SignUpProven("alice@example.test", "password1");
  for (int i = 0; i < 3; ++i) {
    auto r = accounts_->SignInWithPassword("alice@example.test", "nope-nope", caller_);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "invalid_credentials");
  }
  auto limited = accounts_->SignInWithPassword("alice@example.test", "password1", caller_);
  ASSERT_FALSE(limited);
  EXPECT_EQ(limited.error().api_code, "rate_limited");
  EXPECT_GT(limited.error().details["retry_after_seconds"].get<int64_t>(), 0);
  clock_.Advance(std::chrono::seconds(61));
  EXPECT_TRUE(accounts_->SignInWithPassword("alice@example.test", "password1", caller_));
}

TEST(SourceSubjectTest, IPv6CountsByItsSlash64) {
  EXPECT_EQ(SourceSubject("192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(SourceSubject("::ffff:192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(SourceSubject("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(SourceSubject("2001:DB8:1:2::9"), "2001:db8:1:2::/64");
  EXPECT_EQ(SourceSubject("::1"), "0:0:0:0::/64");
  EXPECT_EQ(SourceSubject("system"), "system");
}

// Issue 11: wrong passwords lock their source out of the account, never the owner elsewhere.
TEST_F(AccountServiceTest, FailedSignInsLockOutTheirSourceNotTheOwner) {
  SignUpProven("alice@example.test", "password1");
  const Caller attacker{.address = "198.51.100.7"};
  const Caller owner{.address = "203.0.113.9"};
  for (int i = 0; i < 3; ++i) {
    auto r = accounts_->SignInWithPassword("alice@example.test", "nope-nope", attacker);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "invalid_credentials");
  }
  auto limited = accounts_->SignInWithPassword("alice@example.test", "password1", attacker);
  ASSERT_FALSE(limited);
  EXPECT_EQ(limited.error().api_code, "rate_limited");
  auto mapped = accounts_->SignInWithPassword("alice@example.test", "password1",
                                              Caller{.address = "::ffff:198.51.100.7"});
  ASSERT_FALSE(mapped);
  EXPECT_EQ(mapped.error().api_code, "rate_limited") << "the same source, spelled as IPv6";
  EXPECT_TRUE(accounts_->SignInWithPassword("alice@example.test", "password1", owner))
      << "the owner at another address signs in";

  // One IPv6 /64 is one source.
  for (int i = 0; i < 3; ++i) {
    ASSERT_FALSE(
        accounts_->SignInWithPassword("alice@example.test", "nope-nope",
                                      Caller{.address = "2001:db8:1:2::" + std::to_string(i + 1)}));
  }
  auto same_site = accounts_->SignInWithPassword("alice@example.test", "password1",
                                                 Caller{.address = "2001:db8:1:2::ff"});
  ASSERT_FALSE(same_site);
  EXPECT_EQ(same_site.error().api_code, "rate_limited");
  EXPECT_TRUE(accounts_->SignInWithPassword("alice@example.test", "password1",
                                            Caller{.address = "2001:db8:1:3::1"}));

  // The per-source limit counts every account: 20 misses on strangers stop that source for
  // alice too, and nobody else.
  const Caller sprayer{.address = "192.0.2.99"};
  for (int i = 0; i < 20; ++i) {
    ASSERT_FALSE(accounts_->SignInWithPassword("user" + std::to_string(i) + "@example.test",
                                               "nope-nope", sprayer));
  }
  auto sprayed = accounts_->SignInWithPassword("alice@example.test", "password1", sprayer);
  ASSERT_FALSE(sprayed);
  EXPECT_EQ(sprayed.error().api_code, "rate_limited");
  EXPECT_TRUE(accounts_->SignInWithPassword("alice@example.test", "password1", owner));
}

// Issue 12: refusals that cost nothing come before any password hash, so a flood of sign-ups,
// resets or address proofs cannot hold the HTTP threads in argon2id. The hasher's only slot is
// held: anything that got as far as hashing would answer server_busy instead.
TEST_F(AccountServiceTest, CheapRefusalsComeBeforeAnyPasswordHash) {
  SignUpProven("alice@example.test", "password1");
  ASSERT_TRUE(accounts_->RequestPasswordReset("alice@example.test", caller_));
  const std::string reset = LastLinkToken("alice@example.test", "/auth/reset-password");
  ASSERT_FALSE(reset.empty());
  auto held = hash_slots_.TryAcquire();
  ASSERT_TRUE(held);

  // A link that cannot work: refused as such, not as busy.
  auto bad_reset = accounts_->ResetPassword("not-a-link", "password2", caller_);
  ASSERT_FALSE(bad_reset);
  EXPECT_EQ(bad_reset.error().api_code, "invalid_link");
  auto bad_proof = accounts_->ProveAddress("not-a-link", "password2", caller_);
  ASSERT_FALSE(bad_proof);
  EXPECT_EQ(bad_proof.error().api_code, "invalid_link");
  // A usable link gets as far as the hash: busy, and the link stays usable.
  auto busy = accounts_->ResetPassword(reset, "password2", caller_);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().api_code, "server_busy");

  // Sign-ups over the per-address limit are refused by it, each costing one small write.
  const Caller flood{.address = "198.51.100.7"};
  const int64_t persons = Count("persons");
  for (int i = 0; i < 30; ++i) {  // sign_ups_per_address: 30 an hour
    auto r = accounts_->SignUp("flood" + std::to_string(i) + "@example.test", "password1", flood);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().api_code, "server_busy") << i;
  }
  auto limited = accounts_->SignUp("flood-last@example.test", "password1", flood);
  ASSERT_FALSE(limited);
  EXPECT_EQ(limited.error().api_code, "rate_limited");
  EXPECT_EQ(Count("persons"), persons) << "no refused sign-up stored anything";

  held.reset();
  auto reset_now = accounts_->ResetPassword(reset, "password2", caller_);
  EXPECT_TRUE(reset_now) << reset_now.error().message;
}

TEST_F(AccountServiceTest, SessionsExpire) {
  SignIn s = SignUpProven("alice@example.test", "password1");
  clock_.Advance(std::chrono::hours(24 * 31));
  auto who = accounts_->AuthenticateSession(s.session_token);
  ASSERT_FALSE(who);
  EXPECT_EQ(who.error().api_code, "unauthenticated");
}

TEST_F(AccountServiceTest, LinkRequestsQueueOneMailEach) {
  SignUpProven("alice@example.test", "password1");
  const int64_t mails = Count("outbox_mails");  // the address-proof link
  const int64_t links = Count("link_tokens");
  ASSERT_TRUE(accounts_->RequestMagicLink("ALICE@example.test", caller_));
  ASSERT_TRUE(accounts_->RequestPasswordReset("nobody@example.test", caller_));
  EXPECT_EQ(Count("outbox_mails"), mails + 2);
  EXPECT_EQ(Count("link_tokens"), links + 1) << "no token for an address without an account";
  auto bad = accounts_->RequestMagicLink("not an email", caller_);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().api_code, "invalid_email");
  EXPECT_EQ(Count("outbox_mails"), mails + 2);
}

TEST_F(AccountServiceTest, PersonTableGivesOtherModulesThePersonsEmail) {
  SignIn s = SignUpProven("Alice@Example.test", "password1");
  auto email =
      db_->Read([&](store::Transaction& tx) { return PersonTable::Email(tx, s.person.id); });
  ASSERT_TRUE(email);
  EXPECT_EQ(*email, "Alice@Example.test");  // as typed
  auto none = db_->Read([&](store::Transaction& tx) { return PersonTable::Email(tx, "per_x"); });
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
}

TEST_F(AccountServiceTest, ApiTokensAreStoredHashedAndNamedOncePerPerson) {
  SignIn s = SignUpProven("alice@example.test", "password1");
  auto who = accounts_->AuthenticateSession(s.session_token);
  ASSERT_TRUE(who);
  auto created = accounts_->CreateApiToken(*who, " laptop ", std::nullopt, caller_);
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->first.name, "laptop");
  auto again = accounts_->CreateApiToken(*who, "laptop", std::nullopt, caller_);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().api_code, "name_taken");
  auto via_token = accounts_->AuthenticateApiToken(created->second);
  ASSERT_TRUE(via_token);
  EXPECT_EQ(via_token->person_id, who->person_id);
  EXPECT_EQ(via_token->credential_id, created->first.id);
  // The token's person comes with it (one statement): as the sign-in session resolves them.
  EXPECT_EQ(via_token->email, who->email);
  EXPECT_EQ(via_token->is_operator, who->is_operator);
  EXPECT_TRUE(via_token->email_proven);
  EXPECT_EQ(via_token->via, CredentialKind::kApiToken);
  EXPECT_EQ(via_token->token_last_used_at, 0) << "never used before this request";
  auto listed = accounts_->ListApiTokens(*who);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_TRUE(listed->front().last_used_at.has_value());
  ASSERT_TRUE(accounts_->DeleteApiToken(*who, created->first.id, caller_));
  auto gone = accounts_->AuthenticateApiToken(created->second);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().api_code, "unauthenticated");
}

TEST_F(AccountServiceTest, EnsureOperatorIsIdempotent) {
  EXPECT_EQ(accounts_->EnsureOperator("operator@gpuwerk.local", "password1"), true);
  EXPECT_EQ(accounts_->EnsureOperator("Operator@gpuwerk.local", "password2"), false);
  auto s = accounts_->SignInWithPassword("operator@gpuwerk.local", "password1", caller_);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->person.is_operator);
  EXPECT_TRUE(s->person.email_proven_at.has_value()) << "the operator's address counts as proven";
  auto who = accounts_->AuthenticateSession(s->session_token);
  ASSERT_TRUE(who);
  EXPECT_TRUE(who->email_proven);
}

// Issue 11: whoever proves the mailbox of an unproven account claims it: its password, sign-in
// sessions, API tokens, unused links and SSH keys go; a proven account keeps its keys on a reset.
TEST_F(AccountServiceTest, ProvingTheMailboxClaimsAnUnprovenAccount) {
  ASSERT_TRUE(accounts_->SignUp("victim@example.test", "squatter pw 1", caller_));
  auto squatter = accounts_->SignInWithPassword("victim@example.test", "squatter pw 1", caller_);
  ASSERT_TRUE(squatter) << squatter.error().message;
  auto who = accounts_->AuthenticateSession(squatter->session_token);
  ASSERT_TRUE(who);
  EXPECT_FALSE(who->email_proven);
  // The service itself would make a token (the route table refuses unproven callers): the claim
  // must end it all the same.
  auto token = accounts_->CreateApiToken(*who, "kept", std::nullopt, caller_);
  ASSERT_TRUE(token);

  ASSERT_TRUE(accounts_->RequestMagicLink("victim@example.test", caller_));
  auto owner = accounts_->ConsumeMagicLink(LastLinkToken("victim@example.test", "/auth/magic-link"),
                                           caller_);
  ASSERT_TRUE(owner) << owner.error().message;
  EXPECT_TRUE(owner->person.email_proven_at.has_value());
  EXPECT_FALSE(owner->person.has_password);
  EXPECT_FALSE(accounts_->AuthenticateSession(squatter->session_token));
  EXPECT_FALSE(accounts_->AuthenticateApiToken(token->second));
  EXPECT_FALSE(accounts_->SignInWithPassword("victim@example.test", "squatter pw 1", caller_));
  EXPECT_EQ(keys_removed_for_, std::vector<std::string>{who->person_id});
  auto proven = accounts_->AuthenticateSession(owner->session_token);
  ASSERT_TRUE(proven);
  EXPECT_TRUE(proven->email_proven);

  // A later reset of the now proven account keeps its keys.
  ASSERT_TRUE(accounts_->RequestPasswordReset("victim@example.test", caller_));
  ASSERT_TRUE(accounts_->ResetPassword(LastLinkToken("victim@example.test", "/auth/reset-password"),
                                       "owner pw 22", caller_));
  EXPECT_EQ(keys_removed_for_.size(), 1u);
}

}  // namespace
}  // namespace gpuwerk::auth
