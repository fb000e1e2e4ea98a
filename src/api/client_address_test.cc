// TrustedProxies and ClientAddress: which X-Forwarded-For hop is the client (issue 12 finding 8:
// behind a TLS-terminating proxy every per-source limit was one bucket for everyone).
#include "api/client_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuwerk::api {
namespace {

TrustedProxies Trust(std::vector<std::string> cidrs) {
  auto parsed = TrustedProxies::Parse(cidrs);
  EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error().message);
  return parsed ? *parsed : TrustedProxies();
}

std::string Client(std::string_view peer, std::vector<std::string_view> xff,
                   const TrustedProxies& trusted) {
  return ClientAddress(peer, xff, trusted);
}

TEST(TrustedProxiesTest, ParsesIpv4AndIpv6NetworksAndBareAddresses) {
  TrustedProxies t = Trust({"10.0.0.0/8", "192.0.2.7", "2001:DB8:1::/48", "::1", "10.1.2.3/16"});
  EXPECT_THAT(t.cidrs(), ::testing::ElementsAre("10.0.0.0/8", "192.0.2.7/32", "2001:db8:1::/48",
                                                "::1/128", "10.1.0.0/16"));
  EXPECT_TRUE(t.Contains("10.255.255.255"));
  EXPECT_TRUE(t.Contains("::ffff:10.9.9.9"));  // IPv4-mapped counts as its IPv4
  EXPECT_TRUE(t.Contains("192.0.2.7"));
  EXPECT_FALSE(t.Contains("192.0.2.8"));
  EXPECT_FALSE(t.Contains("11.0.0.1"));
  EXPECT_TRUE(t.Contains("2001:db8:1:ffff::9"));
  EXPECT_FALSE(t.Contains("2001:db8:2::9"));
  EXPECT_TRUE(t.Contains("::1"));
  EXPECT_FALSE(t.Contains("::2"));
  EXPECT_FALSE(t.Contains("10.0.0.1:443"));
  EXPECT_FALSE(t.Contains(""));
  EXPECT_FALSE(t.Contains("garbage"));
  EXPECT_FALSE(TrustedProxies().Contains("127.0.0.1"));
  EXPECT_TRUE(TrustedProxies().empty());
  // Prefix lengths that do not fall on a byte.
  TrustedProxies odd = Trust({"172.16.0.0/12", "fd00::/7"});
  EXPECT_TRUE(odd.Contains("172.31.255.1"));
  EXPECT_FALSE(odd.Contains("172.32.0.1"));
  EXPECT_TRUE(odd.Contains("fdff::1"));
  EXPECT_TRUE(odd.Contains("fc00::1"));
  EXPECT_FALSE(odd.Contains("fe00::1"));
}

TEST(TrustedProxiesTest, RefusesABadEntryNamingTheOption) {
  for (const char* bad :
       {"", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/8/8", "10.0.0/8", "010.0.0.1",
        " 10.0.0.1", "10.0.0.1 ", "proxy.example.com", "fe80::1%eth0", "[::1]", "10.0.0.0/-1",
        "10.0.0.0/1x", "0.0.0.0/0", "::/0", "10.0.0.1\n"}) {
    std::vector<std::string> list = {"192.0.2.1", bad};
    auto parsed = TrustedProxies::Parse(list);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().api_code, "invalid_config") << bad;
    EXPECT_THAT(parsed.error().message, ::testing::StartsWith("trusted_proxies: ")) << bad;
    EXPECT_EQ(parsed.error().message.find('\n'), std::string::npos) << bad;
  }
  auto zero = TrustedProxies::Parse(std::vector<std::string>{"0.0.0.0/0"});
  ASSERT_FALSE(zero);
  EXPECT_THAT(zero.error().message, ::testing::HasSubstr("every address"));
}

TEST(ClientAddressTest, AnUntrustedPeersForwardedForIsIgnored) {
  TrustedProxies t = Trust({"10.0.0.1"});
  EXPECT_EQ(Client("203.0.113.5", {"198.51.100.1"}, t), "203.0.113.5");
  EXPECT_EQ(Client("203.0.113.5", {"198.51.100.1"}, TrustedProxies()), "203.0.113.5");
  EXPECT_EQ(Client("::ffff:203.0.113.5", {}, t), "203.0.113.5");
}

TEST(ClientAddressTest, ATrustedPeerWithoutForwardedForIsTheClient) {
  TrustedProxies t = Trust({"10.0.0.1"});
  EXPECT_EQ(Client("10.0.0.1", {}, t), "10.0.0.1");
}

TEST(ClientAddressTest, TheRightMostHopIsTheClientAndSpoofedLeftMostHopsAreIgnored) {
  TrustedProxies t = Trust({"10.0.0.0/24"});
  EXPECT_EQ(Client("10.0.0.1", {"198.51.100.1"}, t), "198.51.100.1");
  // The client sent "X-Forwarded-For: 127.0.0.1, 1.2.3.4"; the proxy appended what it saw.
  EXPECT_EQ(Client("10.0.0.1", {"127.0.0.1, 1.2.3.4, 198.51.100.1"}, t), "198.51.100.1");
  // A spoofed hop naming a trusted proxy changes nothing either.
  EXPECT_EQ(Client("10.0.0.1", {"10.0.0.2,198.51.100.1"}, t), "198.51.100.1");
  // Chained trusted proxies are skipped from the right.
  EXPECT_EQ(Client("10.0.0.1", {"203.0.113.9, 198.51.100.1, 10.0.0.7, 10.0.0.3"}, t),
            "198.51.100.1");
  // Blanks and tabs around hops are allowed (RFC 9110 OWS).
  EXPECT_EQ(Client("10.0.0.1", {" \t198.51.100.1\t "}, t), "198.51.100.1");
}

TEST(ClientAddressTest, SeveralFieldsAreOneListInOrder) {
  TrustedProxies t = Trust({"10.0.0.0/24"});
  // The last field holds the right-most hops.
  EXPECT_EQ(Client("10.0.0.1", {"203.0.113.9", "198.51.100.1"}, t), "198.51.100.1");
  EXPECT_EQ(Client("10.0.0.1", {"203.0.113.9, 198.51.100.1", "10.0.0.5"}, t), "198.51.100.1");
  EXPECT_EQ(Client("10.0.0.1", {"203.0.113.9", "10.0.0.5, 10.0.0.6"}, t), "203.0.113.9");
}

TEST(ClientAddressTest, EveryHopTrustedGivesTheLeftMost) {
  TrustedProxies t = Trust({"10.0.0.0/24"});
  EXPECT_EQ(Client("10.0.0.1", {"10.0.0.9, 10.0.0.5"}, t), "10.0.0.9");
}

TEST(ClientAddressTest, Ipv6HopsAndPeers) {
  TrustedProxies t = Trust({"2001:db8:aaaa::/48", "10.0.0.1"});
  EXPECT_EQ(Client("2001:db8:aaaa::1", {"2001:DB8:0:0:0:0:0:9"}, t), "2001:db8::9");
  EXPECT_EQ(Client("2001:db8:aaaa::1", {"198.51.100.1, 2001:db8:aaaa::5"}, t), "198.51.100.1");
  EXPECT_EQ(Client("::ffff:10.0.0.1", {"2001:db8:bbbb::1"}, t), "2001:db8:bbbb::1");
  // An IPv4-mapped hop is given as its IPv4 address (one bucket per IPv4 client).
  EXPECT_EQ(Client("10.0.0.1", {"::ffff:198.51.100.1"}, t), "198.51.100.1");
  EXPECT_EQ(Client("2001:db8:bbbb::1", {"198.51.100.1"}, t), "2001:db8:bbbb::1");  // untrusted
}

TEST(ClientAddressTest, AMalformedHopMakesThePeerTheClient) {
  TrustedProxies t = Trust({"10.0.0.0/24"});
  for (std::string_view bad :
       {"", " ", "unknown", "198.51.100.1:443", "[2001:db8::1]", "[2001:db8::1]:443",
        "198.51.100.01", "198.51.100", "fe80::1%eth0", "_hidden", "198.51.100.1;rm",
        "198.51.100.1 198.51.100.2", "198.51.100.1,", "198.51.100.1,,10.0.0.5", "\x1b[31m",
        "198.51.100.1\r\n"}) {
    EXPECT_EQ(Client("10.0.0.1", {bad}, t), "10.0.0.1") << bad;
  }
  // One malformed field among good ones: read from the right, the garbage is met first.
  EXPECT_EQ(Client("10.0.0.1", {"198.51.100.1", "junk"}, t), "10.0.0.1");
  // Garbage left of the client hop is never read (the proxy's own hop decides).
  EXPECT_EQ(Client("10.0.0.1", {"junk, 198.51.100.1"}, t), "198.51.100.1");
  // Very long input stays cheap and safe.
  std::string many(8000, ',');
  EXPECT_EQ(Client("10.0.0.1", {many}, t), "10.0.0.1");
}

TEST(ClientAddressTest, CanonicalIpFormsAndRefusals) {
  EXPECT_EQ(CanonicalIp("192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(CanonicalIp("::FFFF:192.0.2.1"), "192.0.2.1");
  EXPECT_EQ(CanonicalIp("2001:0db8::0001"), "2001:db8::1");
  EXPECT_EQ(CanonicalIp(" 192.0.2.1"), "");
  EXPECT_EQ(CanonicalIp("192.0.2.1:80"), "");
  EXPECT_EQ(CanonicalIp(std::string_view("192.0.2.1\0", 10)), "");
  EXPECT_EQ(CanonicalIp(std::string(100, '1')), "");
}

}  // namespace
}  // namespace gpuwerk::api
