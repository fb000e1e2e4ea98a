#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/ip_networks.h"

namespace gpuwerk::api {

/// The reverse proxies whose `X-Forwarded-For` the HTTP server believes (the `trusted_proxies`
/// option; docs/configuration.md, "Behind a reverse proxy"): a list of IPv4 and IPv6 networks.
/// Empty (the default) trusts nobody: every request's client is its TCP peer.
using TrustedProxies = core::IpNetworks;

/// An IP literal in the form the server hands to handlers (core::CanonicalIp).
using core::CanonicalIp;

/// The client address of a request (Request::remote_address), from its TCP peer `peer` (an IP
/// literal) and the values of its `X-Forwarded-For` header fields in the order received
/// (several fields are one comma-separated list, RFC 9110 §5.3):
/// - a peer that is not in `trusted` is the client; `X-Forwarded-For` is ignored;
/// - from a trusted peer, the hops are read from the right (each proxy appends the address it
///   saw, so only the right-most entries were written by proxies we trust); the first hop that
///   is not itself in `trusted` is the client. Hops to its left were written by the client or
///   by proxies we do not know, so a forged left-most entry changes nothing (list proxies only,
///   never client networks: a client inside a trusted network could name any address);
/// - when every hop is trusted, the left-most hop;
/// - no `X-Forwarded-For`, or any hop read on the way that is not a bare IP literal (empty,
///   "unknown", a port, brackets, garbage): the peer is the client (a malformed value is never
///   believed).
/// The result is in CanonicalIp form. Pure; thread-safe.
std::string ClientAddress(std::string_view peer, std::span<const std::string_view> forwarded_for,
                          const TrustedProxies& trusted);

}  // namespace gpuwerk::api
