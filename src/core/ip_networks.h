#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace gpuwerk::core {

/// A list of IPv4 and IPv6 networks that an address is looked up in: the proxies whose
/// `X-Forwarded-For` the HTTP server believes (api::TrustedProxies, the `trusted_proxies`
/// option) and the TCP balancers whose PROXY protocol header the relay believes
/// (`relay_trusted_proxies`; docs/ssh.md "Behind a TCP balancer"). Empty (the default) holds
/// nobody. Immutable after Parse; thread-safe to read.
class IpNetworks {
 public:
  /// Nobody.
  IpNetworks() = default;

  /// Parses `cidrs`: each `address/prefix` ("10.0.0.0/8", "2001:db8::/32") or a bare address
  /// (one host: /32 or /128), IPv4 dotted quads and IPv6 literals as inet_pton (RFC 4291 §2.2)
  /// reads them, no zone index, no surrounding blanks. Host bits past the prefix are ignored
  /// ("10.1.2.3/8" is 10.0.0.0/8). A prefix of 0 (every address) is refused: it would let any
  /// client choose its own address.
  /// Errors: kInvalidArgument "invalid_config", the message naming `option` and the entry
  /// (escaped and bounded), e.g. "trusted_proxies: \"10.0.0.0/33\" is not an IPv4 or IPv6
  /// network (e.g. 10.0.0.0/8, 2001:db8::/32, 192.0.2.7)".
  static Result<IpNetworks> Parse(std::span<const std::string> cidrs,
                                  std::string_view option = "trusted_proxies");

  bool empty() const { return networks_.empty(); }

  /// Whether `address`, an IP literal ("192.0.2.7", "2001:db8::1", "::ffff:192.0.2.7": an
  /// IPv4-mapped IPv6 address counts as its IPv4 address), lies in one of the networks. False
  /// for anything that is not an IP literal.
  bool Contains(std::string_view address) const;

  /// The networks in canonical form ("10.0.0.0/8", "2001:db8::/32"), in the order given.
  const std::vector<std::string>& cidrs() const { return cidrs_; }

 private:
  struct Network {
    std::array<uint8_t, 16> bytes{};  ///< IPv6, or IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d)
    int prefix = 0;                   ///< of the 128 bits (an IPv4 /8 is 104)
  };
  std::vector<Network> networks_;
  std::vector<std::string> cidrs_;
};

/// An IP literal in canonical form: IPv4 as a dotted quad (also for an IPv4-mapped IPv6
/// address), IPv6 in RFC 5952 form (inet_ntop); "" for anything that is not a bare IPv4 or IPv6
/// literal (blanks around it, a port, brackets, a zone index).
std::string CanonicalIp(std::string_view text);

}  // namespace gpuwerk::core
