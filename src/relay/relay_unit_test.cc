#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "relay/in_memory_relay_authorizer.h"
#include "relay/internal/source_limiter.h"
#include "relay/ssh_key_file.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::relay {
namespace {

class InMemoryRelayAuthorizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    authz_.Put({"i-alpha", "alpha", "alpha-aaaaa", "alice", "10.0.0.1", 22, {"SHA256:alice"}});
    authz_.Put({"i-beta", "beta", "beta-bbbbb", "alice", "10.0.0.2", 22, {"SHA256:alice"}});
    authz_.Put({"i-gamma", "gamma", "gamma-ccccc", "bob", "10.0.0.3", 22, {"SHA256:bob"}});
  }
  AuthorizeDecision Ask(const std::string& user, const std::string& fp) {
    auto d = authz_.Authorize({user, "ssh-ed25519", "AAAA", fp, "192.0.2.1"});
    EXPECT_TRUE(d);
    return *d;
  }
  InMemoryRelayAuthorizer authz_;
};

TEST_F(InMemoryRelayAuthorizerTest, C06_HostnameAlwaysPicksThatInstance) {
  for (int i = 0; i < 10; ++i) {
    auto d = Ask("beta-bbbbb", "SHA256:alice");
    ASSERT_TRUE(d.target);
    EXPECT_EQ(d.target->instance_id, "i-beta");
    EXPECT_EQ(d.target->login, "root");
    EXPECT_EQ(d.target->upstream_host, "10.0.0.2");
  }
  auto d = Ask("ubuntu+alpha-aaaaa", "SHA256:alice");
  ASSERT_TRUE(d.target);
  EXPECT_EQ(d.target->instance_id, "i-alpha");
  EXPECT_EQ(d.target->login, "ubuntu");
}

TEST_F(InMemoryRelayAuthorizerTest, C06_BareLoginIsRefusedAndListsOnlyThisKeysInstances) {
  auto d = Ask("root", "SHA256:alice");
  ASSERT_FALSE(d.target);
  EXPECT_NE(d.refusal.find("\"root\" does not name an instance"), std::string::npos) << d.refusal;
  EXPECT_NE(d.refusal.find("ssh <hostname>@<relay>"), std::string::npos) << d.refusal;
  EXPECT_NE(d.refusal.find("alpha-aaaaa"), std::string::npos);
  EXPECT_NE(d.refusal.find("beta-bbbbb"), std::string::npos);
  EXPECT_EQ(d.refusal.find("gamma"), std::string::npos);
}

TEST_F(InMemoryRelayAuthorizerTest, BareLoginNeverPicksAnInstanceByKeyEvenWhenItReachesOne) {
  for (const char* user : {"root", "ubuntu", "Root"}) {
    auto d = Ask(user, "SHA256:bob");
    EXPECT_FALSE(d.target) << user;
    EXPECT_NE(d.refusal.find("does not name an instance"), std::string::npos) << d.refusal;
    EXPECT_NE(d.refusal.find("gamma-ccccc"), std::string::npos) << d.refusal;  // the way in
  }
  auto none = Ask("root", "SHA256:nobody");
  ASSERT_FALSE(none.target);
  EXPECT_NE(none.refusal.find("does not name an instance"), std::string::npos);
  EXPECT_NE(none.refusal.find("not attached to any live instance"), std::string::npos);
}

TEST_F(InMemoryRelayAuthorizerTest, AnotherPersonsInstanceIsRefusedWithoutNamingIt) {
  auto d = Ask("gamma-ccccc", "SHA256:alice");
  ASSERT_FALSE(d.target);
  EXPECT_NE(d.refusal.find("alpha-aaaaa"), std::string::npos);
  EXPECT_EQ(d.refusal.find("bob"), std::string::npos);
  auto unknown = Ask("alpha-aaaaa", "SHA256:nobody");
  ASSERT_FALSE(unknown.target);
  EXPECT_NE(unknown.refusal.find("not attached to any live instance"), std::string::npos);
}

TEST_F(InMemoryRelayAuthorizerTest, RemovedInstanceIsRefusedAtOnce) {
  authz_.Remove("i-gamma");
  EXPECT_FALSE(Ask("gamma-ccccc", "SHA256:bob").target);
}

TEST(RelaySshKeyFileTest, CreatedOnceWithMode0600AndNeverReplaced) {
  testing::TempDir dir;
  const auto path = dir.path() / "keys" / "host_key";
  auto first = LoadOrCreateEd25519Key(path, "c");
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->created);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(first->public_line.rfind("ssh-ed25519 ", 0), 0u);
  EXPECT_EQ(first->fingerprint.rfind("SHA256:", 0), 0u);
  auto second = LoadOrCreateEd25519Key(path, "c");
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second->public_line, first->public_line);
  EXPECT_EQ(second->fingerprint, first->fingerprint);
}

TEST(RelaySshKeyFileTest, RefusesAKeyReadableByOthersAndGarbage) {
  testing::TempDir dir;
  const auto path = dir.path() / "k";
  ASSERT_TRUE(LoadOrCreateEd25519Key(path, "c"));
  ::chmod(path.c_str(), 0644);
  auto open = LoadOrCreateEd25519Key(path, "c");
  ASSERT_FALSE(open);
  EXPECT_EQ(open.error().api_code, "key_file_mode");
  const auto junk = dir.path() / "junk";
  { std::ofstream(junk) << "not a key\n"; }
  ::chmod(junk.c_str(), 0600);
  auto bad = LoadOrCreateEd25519Key(junk, "c");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().api_code, "key_file_invalid");
}

TEST(RelaySourceLimiterTest, PerSourceAndFailureLimits) {
  using namespace std::chrono_literals;
  using Admission = internal::SourceLimiter::Admission;
  internal::AdmissionLimits limits;
  limits.max_total = 3;
  limits.max_unauthenticated_per_source = 2;
  limits.max_failures_per_source = 2;
  limits.failure_window = 60s;
  internal::SourceLimiter l(limits);
  const auto t0 = internal::SourceLimiter::Clock::now();
  EXPECT_EQ(l.TryAdmit("a", t0), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("a", t0), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("a", t0), Admission::kSourceFull);  // per source
  EXPECT_EQ(l.TryAdmit("b", t0), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("c", t0), Admission::kTotalFull);  // total
  l.Release("a", "");
  l.Release("a", "");
  l.RecordAuthFailure("a", t0);
  l.RecordAuthFailure("a", t0);
  EXPECT_EQ(l.TryAdmit("a", t0 + 1s), Admission::kSourceFailures);  // too many failures
  EXPECT_EQ(l.TryAdmit("a", t0 + 61s), Admission::kAdmitted);       // window passed
}

// Issue 12 finding 4: one attacker holds a /24 or a /64; one address is often many people.
TEST(RelaySourceLimiterTest, SourcesAreCountedPerIpv4Slash24AndIpv6Slash64) {
  EXPECT_EQ(internal::SourcePrefix("192.0.2.77"), "192.0.2.0/24");
  EXPECT_EQ(internal::SourcePrefix("127.0.0.1"), "127.0.0.0/24");
  EXPECT_EQ(internal::SourcePrefix("::ffff:198.51.100.9"), "198.51.100.0/24");
  EXPECT_EQ(internal::SourcePrefix("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::/64");
  EXPECT_EQ(internal::SourcePrefix("2001:db8::1"), "2001:db8::/64");
  EXPECT_EQ(internal::SourcePrefix("not an address"), "not an address");

  using Admission = internal::SourceLimiter::Admission;
  internal::AdmissionLimits limits;
  limits.max_unauthenticated_per_source = 2;
  limits.max_failures_per_source = 2;
  internal::SourceLimiter l(limits);
  EXPECT_EQ(l.TryAdmit("192.0.2.1"), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("192.0.2.200"), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("192.0.2.3"), Admission::kSourceFull);  // the same /24
  EXPECT_EQ(l.TryAdmit("192.0.3.1"), Admission::kAdmitted);    // the next /24
  EXPECT_EQ(l.TryAdmit("2001:db8:1:2::1"), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("2001:db8:1:2:ffff::9"), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("2001:db8:1:2::77"), Admission::kSourceFull);  // the same /64
  EXPECT_EQ(l.TryAdmit("2001:db8:1:3::1"), Admission::kAdmitted);     // the next /64
  // Failed logins count per prefix too.
  l.RecordAuthFailure("198.51.100.1");
  l.RecordAuthFailure("198.51.100.2");
  EXPECT_EQ(l.TryAdmit("198.51.100.3"), Admission::kSourceFailures);
}

// Issue 12 finding 4, as OpenSSH 9.8's PerSourcePenalties: connections that run out of time
// before logging in add up to a penalty that outlasts them; past penalty_min, the prefix's new
// connections are closed at accept until it has run out.
TEST(RelaySourceLimiterTest, TimeoutsAddUpToAPenaltyThatOutlastsTheConnections) {
  using namespace std::chrono_literals;
  using Admission = internal::SourceLimiter::Admission;
  internal::AdmissionLimits limits;
  limits.penalty_timeout = 10s;
  limits.penalty_min = 15s;
  limits.penalty_max = 60s;
  internal::SourceLimiter l(limits);
  const auto t0 = internal::SourceLimiter::Clock::now();
  l.RecordPreAuthTimeout("192.0.2.1", t0);  // 10 s: below penalty_min
  EXPECT_EQ(l.TryAdmit("192.0.2.9", t0), Admission::kAdmitted);
  l.Release("192.0.2.9", "");
  l.RecordPreAuthTimeout("192.0.2.2", t0 + 1s);  // 19 s left: the whole /24 waits
  EXPECT_EQ(l.penalized_sources(t0 + 1s), 1u);
  EXPECT_EQ(l.TryAdmit("192.0.2.9", t0 + 2s), Admission::kSourcePenalized);
  EXPECT_EQ(l.TryAdmit("192.0.3.1", t0 + 2s), Admission::kAdmitted);          // another /24
  EXPECT_EQ(l.TryAdmit("192.0.2.9", t0 + 19s), Admission::kSourcePenalized);  // 20 s in all
  EXPECT_EQ(l.TryAdmit("192.0.2.9", t0 + 20s), Admission::kAdmitted);         // run out
  l.Release("192.0.2.9", "");
  EXPECT_EQ(l.penalized_sources(t0 + 20s), 0u);
  // Many at once never make it more than penalty_max.
  for (int i = 0; i < 100; ++i) l.RecordPreAuthTimeout("198.51.100.1", t0 + 30s);
  EXPECT_EQ(l.TryAdmit("198.51.100.7", t0 + 89s), Admission::kSourcePenalized);
  EXPECT_EQ(l.TryAdmit("198.51.100.7", t0 + 91s), Admission::kAdmitted);

  // 0 s: no penalties at all.
  limits.penalty_timeout = 0s;
  internal::SourceLimiter off(limits);
  for (int i = 0; i < 10; ++i) off.RecordPreAuthTimeout("203.0.113.1", t0);
  EXPECT_EQ(off.TryAdmit("203.0.113.1", t0), Admission::kAdmitted);
}

TEST(RelaySourceLimiterTest, PenaltiesRememberABoundedNumberOfSourcesThenLetNewOnesIn) {
  using namespace std::chrono_literals;
  using Admission = internal::SourceLimiter::Admission;
  internal::AdmissionLimits limits;
  limits.max_penalized_sources = 3;
  internal::SourceLimiter l(limits);
  const auto t0 = internal::SourceLimiter::Clock::now();
  for (int s = 1; s <= 5; ++s) {
    const std::string source = "10.0." + std::to_string(s) + ".1";
    l.RecordPreAuthTimeout(source, t0);
    l.RecordPreAuthTimeout(source, t0);
  }
  EXPECT_EQ(l.penalized_sources(t0), 3u);
  EXPECT_EQ(l.TryAdmit("10.0.3.9", t0), Admission::kSourcePenalized);
  EXPECT_EQ(l.TryAdmit("10.0.4.9", t0), Admission::kAdmitted);  // permissive past the bound
  // Once the remembered ones have run out, room is made for new ones.
  l.RecordPreAuthTimeout("10.0.9.1", t0 + 25s);
  l.RecordPreAuthTimeout("10.0.9.1", t0 + 25s);
  EXPECT_EQ(l.TryAdmit("10.0.9.2", t0 + 25s), Admission::kSourcePenalized);
}

TEST(RelaySourceLimiterTest, MaxStartupsDropsRandomlyPastBeginAndAlwaysAtFull) {
  using Admission = internal::SourceLimiter::Admission;
  internal::AdmissionLimits limits;
  limits.startups_begin = 2;
  limits.startups_rate = 30;
  limits.startups_full = 6;
  internal::SourceLimiter l(limits, /*seed=*/7);
  // Each from its own /24; below `begin` nothing is drawn.
  EXPECT_EQ(l.TryAdmit("10.0.1.1", {}, 0), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("10.0.2.1", {}, 0), Admission::kAdmitted);
  // 2 not logged in: drop below 30%.
  EXPECT_EQ(l.TryAdmit("10.0.3.1", {}, 29), Admission::kStartupsDrop);
  EXPECT_EQ(l.TryAdmit("10.0.3.1", {}, 30), Admission::kAdmitted);
  // 3: 30 + 70 × 1/4 = 47%.
  EXPECT_EQ(l.TryAdmit("10.0.4.1", {}, 46), Admission::kStartupsDrop);
  EXPECT_EQ(l.TryAdmit("10.0.4.1", {}, 47), Admission::kAdmitted);
  // 4: 65%; 5: 82%.
  EXPECT_EQ(l.TryAdmit("10.0.5.1", {}, 64), Admission::kStartupsDrop);
  EXPECT_EQ(l.TryAdmit("10.0.5.1", {}, 65), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit("10.0.6.1", {}, 81), Admission::kStartupsDrop);
  EXPECT_EQ(l.TryAdmit("10.0.6.1", {}, 82), Admission::kAdmitted);
  // 6 = full: always.
  EXPECT_EQ(l.unauthenticated(), 6);
  EXPECT_EQ(l.TryAdmit("10.0.7.1", {}, 99), Admission::kStartupsDrop);
  // Logged-in connections do not count: a login frees a startup slot.
  ASSERT_TRUE(l.TryAuthenticate("10.0.6.1", "alice"));
  EXPECT_EQ(l.TryAdmit("10.0.7.1", {}, 82), Admission::kAdmitted);

  // The real draw: at `begin`, about 30% of new connections are dropped.
  internal::SourceLimiter r(limits, /*seed=*/11);
  ASSERT_EQ(r.TryAdmit("10.0.1.1", {}, 0), Admission::kAdmitted);
  ASSERT_EQ(r.TryAdmit("10.0.2.1", {}, 0), Admission::kAdmitted);
  int dropped = 0;
  for (int i = 0; i < 4000; ++i) {
    if (r.TryAdmit("10.0.9.1") == Admission::kStartupsDrop) {
      ++dropped;
    } else {
      r.Release("10.0.9.1", "");
    }
  }
  EXPECT_GT(dropped, 4000 * 25 / 100);
  EXPECT_LT(dropped, 4000 * 35 / 100);
}

TEST(RelaySourceLimiterTest, LoggedInConnectionsCountPerPersonNotPerSource) {
  using Admission = internal::SourceLimiter::Admission;
  internal::AdmissionLimits limits;
  limits.max_unauthenticated_per_source = 2;
  limits.max_sessions_per_person = 3;
  internal::SourceLimiter l(limits);
  const std::string office = "203.0.113.5";  // one NAT address
  ASSERT_EQ(l.TryAdmit(office), Admission::kAdmitted);
  ASSERT_EQ(l.TryAdmit(office), Admission::kAdmitted);
  EXPECT_EQ(l.TryAdmit(office), Admission::kSourceFull);
  // Logging in frees the source's slot: the same address goes on opening relay sessions.
  EXPECT_TRUE(l.TryAuthenticate(office, "alice"));
  EXPECT_TRUE(l.TryAuthenticate(office, "alice"));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(l.TryAdmit(office), Admission::kAdmitted) << i;
    if (i < 1) {
      EXPECT_TRUE(l.TryAuthenticate(office, "alice"));
    } else {
      EXPECT_FALSE(l.TryAuthenticate(office, "alice")) << i;              // alice holds 3
      EXPECT_TRUE(l.TryAuthenticate(office, "bob" + std::to_string(i)));  // others do not
    }
  }
  EXPECT_EQ(l.sessions_of("alice"), 3);
  EXPECT_EQ(l.unauthenticated(), 0);
  // A login that failed after all goes back to counting for its source.
  l.Unauthenticate(office, "bob2");
  EXPECT_EQ(l.unauthenticated(), 1);
  l.Release(office, "");
  l.Release(office, "alice");
  EXPECT_EQ(l.sessions_of("alice"), 2);
  EXPECT_EQ(l.open_total(), 3);  // 5 admitted, 2 ended
}

TEST(RelaySourceLimiterTest, RefusalsAreLoggedOncePerSourceAndInterval) {
  using namespace std::chrono_literals;
  internal::SourceLimiter l(internal::AdmissionLimits{});
  const auto t0 = internal::SourceLimiter::Clock::now();
  EXPECT_EQ(l.RefusalToLog("127.0.0.0/24", t0, 60s), 1u);
  for (int i = 0; i < 999; ++i) EXPECT_FALSE(l.RefusalToLog("127.0.0.0/24", t0 + 1s, 60s));
  EXPECT_EQ(l.RefusalToLog("127.0.1.0/24", t0 + 1s, 60s), 1u);      // another source: its own line
  EXPECT_EQ(l.RefusalToLog("127.0.0.0/24", t0 + 61s, 60s), 1000u);  // the count since
  // However many sources, the bookkeeping stays bounded.
  for (int i = 0; i < 20'000; ++i) l.RefusalToLog("src" + std::to_string(i), t0 + 62s, 60s);
  EXPECT_LE(l.refusal_log_keys(), 4097u);
}

}  // namespace
}  // namespace gpuwerk::relay
