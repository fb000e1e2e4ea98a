#include "relay/proxy_header.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <vector>

namespace gpuwerk::relay {
namespace {

using Status = ProxyHeaderParse::Status;

constexpr std::string_view kV1Prefix = "PROXY ";
constexpr char kV2Signature[12] = {'\r', '\n', '\r', '\n', '\0', '\r',
                                   '\n', 'Q',  'U',  'I',  'T',  '\n'};

ProxyHeaderParse Invalid(std::string error) {
  ProxyHeaderParse p;
  p.status = Status::kInvalid;
  p.error = std::move(error);
  return p;
}

ProxyHeaderParse NeedMore(size_t max_read, bool stop_after_newline) {
  ProxyHeaderParse p;
  p.status = Status::kNeedMore;
  p.max_read = max_read;
  p.stop_after_newline = stop_after_newline;
  return p;
}

/// IPv4 as a dotted quad (also an IPv4-mapped IPv6 address), IPv6 as inet_ntop writes it.
std::string FormatV4(const uint8_t* four) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, four, buf, sizeof buf);
  return buf;
}

std::string FormatV6(const uint8_t* sixteen) {
  in6_addr a{};
  std::memcpy(&a, sixteen, 16);
  if (IN6_IS_ADDR_V4MAPPED(&a)) return FormatV4(sixteen + 12);
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
  return buf;
}

/// A version 1 address of the family `family` (AF_INET, AF_INET6), canonical; "" when it is not.
std::string V1Address(std::string_view token, int family) {
  if (token.empty() || token.size() >= INET6_ADDRSTRLEN) return "";
  const std::string s(token);
  if (s.find('\0') != std::string::npos) return "";
  uint8_t bytes[16] = {};
  if (::inet_pton(family, s.c_str(), bytes) != 1) return "";
  return family == AF_INET ? FormatV4(bytes) : FormatV6(bytes);
}

/// A version 1 port: 1 to 5 decimal digits, at most 65535.
bool V1Port(std::string_view token, uint16_t* port) {
  if (token.empty() || token.size() > 5) return false;
  uint32_t v = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

ProxyHeaderParse ParseV1(std::string_view bytes) {
  const size_t prefix = std::min(bytes.size(), kV1Prefix.size());
  if (bytes.substr(0, prefix) != kV1Prefix.substr(0, prefix)) {
    return Invalid("not a PROXY protocol header");
  }
  const size_t newline = bytes.find('\n');
  if (newline == std::string_view::npos) {
    // Every byte so far belongs to the line: printable US-ASCII, a CR only as the line's end.
    for (size_t i = 0; i < bytes.size(); ++i) {
      const auto c = static_cast<unsigned char>(bytes[i]);
      if ((c < 0x20 || c > 0x7e) && !(c == '\r' && i + 1 == bytes.size())) {
        return Invalid("a PROXY protocol v1 header holds a byte that is not printable");
      }
    }
    if (bytes.size() >= kProxyV1MaxBytes) {
      return Invalid("a PROXY protocol v1 header longer than 107 bytes");
    }
    return NeedMore(kProxyV1MaxBytes - bytes.size(), true);
  }
  const size_t length = newline + 1;
  if (length > kProxyV1MaxBytes) return Invalid("a PROXY protocol v1 header longer than 107 bytes");
  if (newline < kV1Prefix.size() || bytes[newline - 1] != '\r') {
    return Invalid("a PROXY protocol v1 header that does not end in CRLF");
  }
  const std::string_view line = bytes.substr(kV1Prefix.size(), newline - 1 - kV1Prefix.size());
  for (char ch : line) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c > 0x7e) {
      return Invalid("a PROXY protocol v1 header holds a byte that is not printable");
    }
  }
  std::vector<std::string_view> tokens;
  size_t start = 0;
  while (true) {
    const size_t space = line.find(' ', start);
    tokens.push_back(line.substr(start, space == std::string_view::npos ? space : space - start));
    if (space == std::string_view::npos) break;
    start = space + 1;
  }
  ProxyHeaderParse p;
  p.status = Status::kComplete;
  p.header.version = 1;
  p.header.length = length;
  if (tokens[0] == "UNKNOWN") {  // the rest of the line is to be ignored (section 2.1)
    p.header.local = true;
    return p;
  }
  int family = 0;
  if (tokens[0] == "TCP4") {
    family = AF_INET;
  } else if (tokens[0] == "TCP6") {
    family = AF_INET6;
  } else {
    return Invalid("a PROXY protocol v1 header with a protocol other than TCP4, TCP6, UNKNOWN");
  }
  if (tokens.size() != 5) {
    return Invalid("a PROXY protocol v1 header without exactly two addresses and two ports");
  }
  p.header.source_address = V1Address(tokens[1], family);
  p.header.destination_address = V1Address(tokens[2], family);
  if (p.header.source_address.empty() || p.header.destination_address.empty()) {
    return Invalid("a PROXY protocol v1 header with an address not of its protocol's family");
  }
  if (!V1Port(tokens[3], &p.header.source_port) || !V1Port(tokens[4], &p.header.destination_port)) {
    return Invalid("a PROXY protocol v1 header with a port that is not 0 to 65535");
  }
  return p;
}

ProxyHeaderParse ParseV2(std::string_view bytes) {
  const size_t prefix = std::min(bytes.size(), sizeof kV2Signature);
  if (std::memcmp(bytes.data(), kV2Signature, prefix) != 0) {
    return Invalid("not a PROXY protocol header");
  }
  if (bytes.size() < 16) return NeedMore(16 - bytes.size(), false);
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint8_t version = b[12] >> 4;
  const uint8_t command = b[12] & 0x0f;
  const uint8_t family = b[13] >> 4;
  const uint8_t transport = b[13] & 0x0f;
  const size_t rest = (size_t{b[14]} << 8) | b[15];
  if (version != 2) return Invalid("a PROXY protocol v2 header of another version");
  if (command > 1) return Invalid("a PROXY protocol v2 header with an unknown command");
  if (family > 3 || transport > 2) {
    return Invalid("a PROXY protocol v2 header with an unknown address family or transport");
  }
  const size_t length = 16 + rest;
  if (length > kProxyV2MaxBytes) {
    return Invalid("a PROXY protocol v2 header longer than " + std::to_string(kProxyV2MaxBytes) +
                   " bytes");
  }
  if (bytes.size() < length) return NeedMore(length - bytes.size(), false);
  ProxyHeaderParse p;
  p.status = Status::kComplete;
  p.header.version = 2;
  p.header.length = length;
  // LOCAL: the balancer's own connection (a health check); its block is discarded, family and
  // all (section 2.2). PROXY over AF_UNSPEC: the real endpoints are used as well.
  if (command == 0 || family == 0) {
    p.header.local = true;
    return p;
  }
  if (family == 3 || transport != 1) {
    return Invalid("a PROXY protocol v2 header for a UNIX socket or datagrams, not TCP");
  }
  const size_t addresses = family == 1 ? 12 : 36;
  if (rest < addresses) {
    return Invalid("a PROXY protocol v2 header too short for its addresses");
  }
  const uint8_t* a = b + 16;
  if (family == 1) {
    p.header.source_address = FormatV4(a);
    p.header.destination_address = FormatV4(a + 4);
    a += 8;
  } else {
    p.header.source_address = FormatV6(a);
    p.header.destination_address = FormatV6(a + 16);
    a += 32;
  }
  p.header.source_port = static_cast<uint16_t>((a[0] << 8) | a[1]);
  p.header.destination_port = static_cast<uint16_t>((a[2] << 8) | a[3]);
  // TLVs (section 2.2.x): type, 16-bit length, value. None is needed; each must fit.
  size_t at = 16 + addresses;
  while (at < length) {
    if (length - at < 3) return Invalid("a PROXY protocol v2 header with a truncated TLV");
    const size_t value = (size_t{b[at + 1]} << 8) | b[at + 2];
    if (length - at - 3 < value) {
      return Invalid("a PROXY protocol v2 header with a TLV longer than the header");
    }
    at += 3 + value;
  }
  return p;
}

}  // namespace

ProxyHeaderParse ParseProxyHeader(std::string_view bytes) {
  if (bytes.empty()) return NeedMore(1, false);  // the first byte tells the version
  if (bytes[0] == 'P') return ParseV1(bytes);
  if (bytes[0] == '\r') return ParseV2(bytes);
  return Invalid("not a PROXY protocol header");
}

}  // namespace gpuwerk::relay
