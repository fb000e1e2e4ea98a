#include "protocol/relay_routing.h"

#include <gtest/gtest.h>

namespace gpuwerk::protocol {
namespace {

TEST(ParseRelayUserTest, SplitsLoginAndHostname) {
  auto u = ParseRelayUser("ubuntu+alpha-k3x7q");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->login, "ubuntu");
  EXPECT_EQ(u->hostname, "alpha-k3x7q");
  auto bare = ParseRelayUser("Alpha-K3X7Q");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->login, "root");
  EXPECT_EQ(bare->hostname, "alpha-k3x7q");
  auto login = ParseRelayUser("ubuntu");
  ASSERT_TRUE(login);
  EXPECT_EQ(login->hostname, "");
  EXPECT_EQ(login->bare_login, "ubuntu");
  // "deploy-admin" has the hostname shape ("-" and 5 base32 chars): read as a hostname.
  EXPECT_TRUE(LooksLikeInstanceHostname("deploy-admin"));
  EXPECT_FALSE(LooksLikeInstanceHostname("deploy-adm1n"));
  EXPECT_FALSE(LooksLikeInstanceHostname("-abcde"));
}

TEST(ParseRelayUserTest, RefusesMalformedNames) {
  for (const char* bad : {"", "+alpha-k3x7q", "root+", "root+-x", "a b", "root+al/pha",
                          "root+alpha+beta", "9root+alpha"}) {
    auto u = ParseRelayUser(bad);
    ASSERT_FALSE(u) << bad;
    EXPECT_EQ(u.error().api_code, "invalid_relay_user") << bad;
  }
}

TEST(DecideRelayLoginTest, C06_BareLoginNeverPicksAnInstanceByKeyAndTheHostnameDoes) {
  const std::vector<RelayCandidate> one = {
      {.instance_id = "ins_1", .name = "alpha", .hostname = "alpha-k3x7q", .person_id = "per_a"}};
  RelayAuthorizeRequest request{.user = "root",
                                .key_type = "ssh-ed25519",
                                .public_key = "AAAA",
                                .fingerprint = "SHA256:a",
                                .source_address = "192.0.2.1"};
  auto bare = DecideRelayLogin(request, one);
  EXPECT_FALSE(bare.target);
  EXPECT_EQ(bare.code, "not_authorized");
  EXPECT_NE(bare.message.find("\"root\" does not name an instance"), std::string::npos)
      << bare.message;
  EXPECT_NE(bare.message.find("alpha-k3x7q"), std::string::npos) << bare.message;
  request.user = "alpha-k3x7q";
  auto named = DecideRelayLogin(request, one);
  ASSERT_TRUE(named.target);
  EXPECT_EQ(named.target->instance_id, "ins_1");
  EXPECT_EQ(named.target->login, "root");
  EXPECT_EQ(named.target->person_id, "per_a");
}

}  // namespace
}  // namespace gpuwerk::protocol
