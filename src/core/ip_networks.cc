#include "core/ip_networks.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>

#include <cstring>
#include <optional>

#include "core/strings.h"

namespace gpuwerk::core {
namespace {

/// The 16 bytes of an IP literal, IPv4 as IPv4-mapped IPv6; nullopt when `text` is not a bare
/// IPv4 or IPv6 literal. `v4` tells which it was.
std::optional<std::array<uint8_t, 16>> ParseIp(std::string_view text, bool* v4) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string s(text);  // inet_pton needs a terminated string (and refuses embedded NULs)
  if (s.find('\0') != std::string::npos) return std::nullopt;
  std::array<uint8_t, 16> bytes{};
  if (s.find(':') == std::string::npos) {
    in_addr a{};
    if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
    bytes[10] = bytes[11] = 0xff;
    std::memcpy(bytes.data() + 12, &a, 4);
    *v4 = true;
    return bytes;
  }
  in6_addr a{};
  if (::inet_pton(AF_INET6, s.c_str(), &a) != 1) return std::nullopt;
  std::memcpy(bytes.data(), &a, 16);
  *v4 = IN6_IS_ADDR_V4MAPPED(&a);
  return bytes;
}

std::string Format(const std::array<uint8_t, 16>& bytes, bool v4) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4) {
    ::inet_ntop(AF_INET, bytes.data() + 12, buf, sizeof(buf));
  } else {
    ::inet_ntop(AF_INET6, bytes.data(), buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

Result<IpNetworks> IpNetworks::Parse(std::span<const std::string> cidrs, std::string_view option) {
  IpNetworks out;
  for (const std::string& entry : cidrs) {
    const auto bad = [&](std::string_view why) {
      return InvalidArgument(
          "invalid_config",
          fmt::format("{}: \"{}\" is not an IPv4 or IPv6 network{} (e.g. 10.0.0.0/8, "
                      "2001:db8::/32, 192.0.2.7)",
                      option, BoundedPrintable(entry, 64), why));
    };
    const size_t slash = entry.find('/');
    bool v4 = false;
    auto bytes = ParseIp(std::string_view(entry).substr(0, slash), &v4);
    if (!bytes) return bad("");
    const int max = v4 ? 32 : 128;
    int prefix = max;
    if (slash != std::string::npos) {
      const std::string_view digits = std::string_view(entry).substr(slash + 1);
      if (digits.empty() || digits.size() > 3) return bad("");
      prefix = 0;
      for (char c : digits) {
        if (c < '0' || c > '9') return bad("");
        prefix = prefix * 10 + (c - '0');
      }
      if (prefix > max) return bad("");
      if (prefix == 0) return bad(": a /0 would trust every address");
    }
    Network network{.bytes = *bytes, .prefix = v4 ? prefix + 96 : prefix};
    for (int bit = network.prefix; bit < 128; ++bit) {
      network.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80u >> (bit % 8)));
    }
    out.cidrs_.push_back(fmt::format("{}/{}", Format(network.bytes, v4), prefix));
    out.networks_.push_back(network);
  }
  return out;
}

bool IpNetworks::Contains(std::string_view address) const {
  if (networks_.empty()) return false;
  bool v4 = false;
  auto bytes = ParseIp(address, &v4);
  if (!bytes) return false;
  for (const Network& n : networks_) {
    const int whole = n.prefix / 8;
    if (std::memcmp(bytes->data(), n.bytes.data(), static_cast<size_t>(whole)) != 0) continue;
    const int rest = n.prefix % 8;
    if (rest != 0) {
      const auto mask = static_cast<uint8_t>(0xff00u >> rest);
      if (((*bytes)[whole] & mask) != n.bytes[whole]) continue;
    }
    return true;
  }
  return false;
}

std::string CanonicalIp(std::string_view text) {
  bool v4 = false;
  auto bytes = ParseIp(text, &v4);
  return bytes ? Format(*bytes, v4) : std::string();
}

}  // namespace gpuwerk::core
