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
  internal::SourceLimiter l(3, 2, 2, 60s);
  const auto t0 = internal::SourceLimiter::Clock::now();
  EXPECT_TRUE(l.TryAcquire("a", t0));
  EXPECT_TRUE(l.TryAcquire("a", t0));
  EXPECT_FALSE(l.TryAcquire("a", t0));  // per source
  EXPECT_TRUE(l.TryAcquire("b", t0));
  EXPECT_FALSE(l.TryAcquire("c", t0));  // total
  l.Release("a");
  l.Release("a");
  l.RecordAuthFailure("a", t0);
  l.RecordAuthFailure("a", t0);
  EXPECT_FALSE(l.TryAcquire("a", t0 + 1s));  // too many failures
  EXPECT_TRUE(l.TryAcquire("a", t0 + 61s));  // window passed
}

}  // namespace
}  // namespace gpuwerk::relay
