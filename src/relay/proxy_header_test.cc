// The PROXY protocol header reader against the examples of HAProxy's specification
// (haproxy.org/download/2.9/doc/proxy-protocol.txt, sections 2.1 and 2.2).
#include "relay/proxy_header.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuwerk::relay {
namespace {

using Status = ProxyHeaderParse::Status;

const std::string kSignature("\r\n\r\n\0\r\nQUIT\n", 12);

/// A version 2 header: signature, version/command, family/transport, length, then `body`.
std::string V2(uint8_t ver_cmd, uint8_t family, const std::string& body) {
  std::string h = kSignature;
  h += static_cast<char>(ver_cmd);
  h += static_cast<char>(family);
  h += static_cast<char>(body.size() >> 8);
  h += static_cast<char>(body.size() & 0xff);
  return h + body;
}

std::string Bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s += static_cast<char>(b);
  return s;
}

/// 192.0.2.7:51234 → 198.51.100.1:22
const std::string kInetBody = Bytes({192, 0, 2, 7, 198, 51, 100, 1, 0xc8, 0x22, 0, 22});

TEST(ProxyHeaderTest, V1Tcp4) {
  const std::string h = "PROXY TCP4 192.0.2.7 198.51.100.1 51234 22\r\n";
  auto p = ParseProxyHeader(h + "SSH-2.0-OpenSSH_9.2\r\n");  // the client's bytes follow
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.version, 1);
  EXPECT_FALSE(p.header.local);
  EXPECT_EQ(p.header.source_address, "192.0.2.7");
  EXPECT_EQ(p.header.source_port, 51234);
  EXPECT_EQ(p.header.destination_address, "198.51.100.1");
  EXPECT_EQ(p.header.destination_port, 22);
  EXPECT_EQ(p.header.length, h.size());
}

TEST(ProxyHeaderTest, V1Tcp6AndTheLongestLine) {
  auto p = ParseProxyHeader("PROXY TCP6 2001:db8::1 2001:db8::2 65535 0\r\n");
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.source_address, "2001:db8::1");
  EXPECT_EQ(p.header.source_port, 65535);
  EXPECT_EQ(p.header.destination_port, 0);
  // The longest TCP6 line is 104 bytes; the specification's worst case, 107, is UNKNOWN's.
  const std::string full = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
  std::string h = "PROXY TCP6 " + full + " " + full + " 65535 65535\r\n";
  EXPECT_EQ(h.size(), 104u);
  p = ParseProxyHeader(h);
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.source_address, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  h = "PROXY UNKNOWN " + full + " " + full + " 65535 65535\r\n";
  EXPECT_EQ(h.size(), kProxyV1MaxBytes);
  p = ParseProxyHeader(h);
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.length, 107u);
  // An IPv4-mapped address is its IPv4 address, as the relay writes peers.
  p = ParseProxyHeader("PROXY TCP6 ::ffff:192.0.2.7 ::1 1 2\r\n");
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.source_address, "192.0.2.7");
}

TEST(ProxyHeaderTest, V1UnknownUsesTheRealPeer) {
  for (const std::string h :
       {"PROXY UNKNOWN\r\n", "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n"}) {
    auto p = ParseProxyHeader(h);
    ASSERT_EQ(p.status, Status::kComplete) << h;
    EXPECT_TRUE(p.header.local);
    EXPECT_EQ(p.header.source_address, "");
    EXPECT_EQ(p.header.length, h.size());
  }
}

TEST(ProxyHeaderTest, V1PrefixesAskForMoreUpToTheLineEnd) {
  const std::string h = "PROXY TCP4 192.0.2.7 198.51.100.1 51234 22\r\n";
  for (size_t n = 1; n < h.size(); ++n) {
    auto p = ParseProxyHeader(h.substr(0, n));
    ASSERT_EQ(p.status, Status::kNeedMore) << n << ": " << p.error;
    EXPECT_TRUE(p.stop_after_newline) << n;
    EXPECT_EQ(p.max_read, kProxyV1MaxBytes - n);
  }
  EXPECT_EQ(ParseProxyHeader("").max_read, 1u);  // one byte tells the version
}

TEST(ProxyHeaderTest, V1Malformed) {
  for (const std::string h : {
           "PROXY TCP4 192.0.2.7 198.51.100.1 51234 22\n",        // LF without CR
           "PROXY TCP4 192.0.2.7  198.51.100.1 51234 22\r\n",     // two spaces
           "PROXY TCP4 192.0.2.7 198.51.100.1 51234\r\n",         // a port short
           "PROXY TCP4 192.0.2.7 198.51.100.1 51234 22 x\r\n",    // one too many
           "PROXY TCP4 2001:db8::1 198.51.100.1 51234 22\r\n",    // IPv6 under TCP4
           "PROXY TCP6 192.0.2.7 2001:db8::2 51234 22\r\n",       // IPv4 under TCP6
           "PROXY TCP4 192.0.2.7 198.51.100.1 65536 22\r\n",      // port too large
           "PROXY TCP4 192.0.2.7 198.51.100.1 -1 22\r\n",         // not a number
           "PROXY TCP4 192.0.2.256 198.51.100.1 1 22\r\n",        // not an address
           "PROXY UDP4 192.0.2.7 198.51.100.1 51234 22\r\n",      // not TCP
           "PROXY \r\n",                                          // no protocol
           "PROXY TCP4 192.0.2.7 198.51.100.1 51234 22\r\x01\n",  // a control byte
           "PROXY TCP4 192.0.2.7\x1b[2J 198.51.100.1 1 22\r\n",   // ESC
       }) {
    auto p = ParseProxyHeader(h);
    EXPECT_EQ(p.status, Status::kInvalid) << h;
    EXPECT_FALSE(p.error.empty());
  }
}

TEST(ProxyHeaderTest, V1OversizedWithoutLineEnd) {
  std::string h = "PROXY UNKNOWN ";
  h.append(kProxyV1MaxBytes - h.size() - 1, 'x');
  EXPECT_EQ(ParseProxyHeader(h).status, Status::kNeedMore);
  h += 'x';  // 107 bytes and no line end yet: too long whatever follows
  auto p = ParseProxyHeader(h);
  EXPECT_EQ(p.status, Status::kInvalid);
  EXPECT_NE(p.error.find("107"), std::string::npos) << p.error;
  EXPECT_EQ(ParseProxyHeader(h + "\r\n").status, Status::kInvalid);
}

TEST(ProxyHeaderTest, NotAHeaderFailsAtTheFirstByte) {
  EXPECT_EQ(ParseProxyHeader("S").status, Status::kInvalid);  // "SSH-2.0-…": no balancer
  EXPECT_EQ(ParseProxyHeader("PROXX").status, Status::kInvalid);
  EXPECT_EQ(ParseProxyHeader(std::string("\r\n\r\n\0\r\nQUIX", 11)).status,
            Status::kInvalid);  // signature
  EXPECT_EQ(ParseProxyHeader(std::string("\r\n\r\n\0\r\nQUIT\r", 12)).status, Status::kInvalid);
  EXPECT_EQ(ParseProxyHeader("GET / HTTP/1.1\r\n").status, Status::kInvalid);
}

TEST(ProxyHeaderTest, V2ProxyInet) {
  const std::string h = V2(0x21, 0x11, kInetBody);
  auto p = ParseProxyHeader(h + "SSH-2.0-x\r\n");
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.version, 2);
  EXPECT_FALSE(p.header.local);
  EXPECT_EQ(p.header.source_address, "192.0.2.7");
  EXPECT_EQ(p.header.source_port, 51234);
  EXPECT_EQ(p.header.destination_address, "198.51.100.1");
  EXPECT_EQ(p.header.destination_port, 22);
  EXPECT_EQ(p.header.length, 28u);
}

TEST(ProxyHeaderTest, V2ProxyInet6) {
  std::string body(36, '\0');
  body[0] = 0x20, body[1] = 0x01, body[2] = 0x0d, body[3] = static_cast<char>(0xb8);
  body[15] = 1;
  body[16] = 0x20, body[17] = 0x01, body[18] = 0x0d, body[19] = static_cast<char>(0xb8);
  body[31] = 2;
  body[32] = 0x04, body[33] = 0x00, body[35] = 22;
  auto p = ParseProxyHeader(V2(0x21, 0x21, body));
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.source_address, "2001:db8::1");
  EXPECT_EQ(p.header.source_port, 1024);
  EXPECT_EQ(p.header.destination_address, "2001:db8::2");
  EXPECT_EQ(p.header.destination_port, 22);
}

TEST(ProxyHeaderTest, V2LocalUsesTheRealPeer) {
  // A health check: LOCAL, family UNSPEC, no addresses; and LOCAL with a block to discard.
  for (const std::string& h : {V2(0x20, 0x00, ""), V2(0x20, 0x11, kInetBody)}) {
    auto p = ParseProxyHeader(h);
    ASSERT_EQ(p.status, Status::kComplete) << p.error;
    EXPECT_TRUE(p.header.local);
    EXPECT_EQ(p.header.source_address, "");
    EXPECT_EQ(p.header.length, h.size());
  }
  auto p = ParseProxyHeader(V2(0x21, 0x00, ""));  // PROXY over AF_UNSPEC
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_TRUE(p.header.local);
}

TEST(ProxyHeaderTest, V2TlvsAreSkipped) {
  // PP2_TYPE_ALPN "h2", PP2_TYPE_AUTHORITY "relay.example", PP2_TYPE_NOOP of 0 bytes.
  const std::string tlvs =
      Bytes({0x01, 0, 2}) + "h2" + Bytes({0x02, 0, 13}) + "relay.example" + Bytes({0x04, 0, 0});
  const std::string h = V2(0x21, 0x11, kInetBody + tlvs);
  auto p = ParseProxyHeader(h + "SSH-2.0-x\r\n");
  ASSERT_EQ(p.status, Status::kComplete) << p.error;
  EXPECT_EQ(p.header.source_address, "192.0.2.7");
  EXPECT_EQ(p.header.length, h.size());
  // A TLV whose length runs past the header, and one cut inside its own three bytes.
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x11, kInetBody + Bytes({0x01, 0, 9}) + "h2")).status,
            Status::kInvalid);
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x11, kInetBody + Bytes({0x01, 0}))).status,
            Status::kInvalid);
}

TEST(ProxyHeaderTest, V2TruncatedAsksForExactlyTheRest) {
  const std::string h = V2(0x21, 0x11, kInetBody);
  for (size_t n = 1; n < h.size(); ++n) {
    auto p = ParseProxyHeader(h.substr(0, n));
    ASSERT_EQ(p.status, Status::kNeedMore) << n << ": " << p.error;
    EXPECT_FALSE(p.stop_after_newline);
    // Never more than the header holds, so the client's bytes stay in the socket.
    EXPECT_LE(n + p.max_read, h.size()) << n;
    EXPECT_GT(p.max_read, 0u);
  }
  EXPECT_EQ(ParseProxyHeader(h.substr(0, 16)).max_read, 12u);
}

TEST(ProxyHeaderTest, V2Malformed) {
  EXPECT_EQ(ParseProxyHeader(V2(0x11, 0x11, kInetBody)).status, Status::kInvalid);  // version 1
  EXPECT_EQ(ParseProxyHeader(V2(0x22, 0x11, kInetBody)).status, Status::kInvalid);  // command 2
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x41, kInetBody)).status, Status::kInvalid);  // family 4
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x13, kInetBody)).status, Status::kInvalid);  // transport 3
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x12, kInetBody)).status, Status::kInvalid);  // datagrams
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x31, std::string(216, 'a'))).status,
            Status::kInvalid);  // UNIX socket
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x11, kInetBody.substr(0, 11))).status,
            Status::kInvalid);  // too short for its addresses
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x21, kInetBody)).status, Status::kInvalid);  // INET6, 12
}

TEST(ProxyHeaderTest, V2Oversized) {
  const std::string tlv_head = Bytes({0xe0, 0x10, 0x00});  // PP2_TYPE_MIN_CUSTOM, 4096 bytes
  const std::string big = kInetBody + tlv_head + std::string(4096, 'x');
  auto p = ParseProxyHeader(V2(0x21, 0x11, big).substr(0, 16));  // the length alone tells
  EXPECT_EQ(p.status, Status::kInvalid);
  EXPECT_NE(p.error.find("longer than"), std::string::npos) << p.error;
  // The largest allowed one is read whole.
  const std::string fits = kInetBody + Bytes({0xe0, 0x0f, 0xf1}) + std::string(0x0ff1, 'x');
  ASSERT_EQ(16 + fits.size(), kProxyV2MaxBytes);
  EXPECT_EQ(ParseProxyHeader(V2(0x21, 0x11, fits)).status, Status::kComplete);
}

}  // namespace
}  // namespace gpuwerk::relay
