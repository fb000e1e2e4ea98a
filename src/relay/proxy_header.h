#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuwerk::relay {

/// The PROXY protocol header a TCP balancer puts in front of a connection it passes on: version
/// 1 (a text line) or version 2 (binary), as HAProxy's "The PROXY protocol" (versions 1 & 2,
/// haproxy.org/download/2.9/doc/proxy-protocol.txt) defines them. The relay reads one from the
/// balancers it trusts (RelayOptions::trusted_proxies; docs/ssh.md "Behind a TCP balancer").
struct ProxyHeader {
  int version = 0;  ///< 1 or 2
  /// True when the header names no client, and the connection's own peer (the balancer) is
  /// the client, as the specification says for these: version 1 "UNKNOWN", version 2 LOCAL (a
  /// balancer's own health check), version 2 PROXY with family AF_UNSPEC.
  bool local = false;
  /// The client's address and port (local: empty and 0): IPv4 as a dotted quad (also for an
  /// IPv4-mapped IPv6 address), IPv6 as inet_ntop writes it (RFC 5952).
  std::string source_address;
  uint16_t source_port = 0;
  /// The address and port the client connected to, at the balancer (local: empty and 0).
  std::string destination_address;
  uint16_t destination_port = 0;
  size_t length = 0;  ///< bytes the header takes, line end or TLVs included
};

/// Version 1's longest line: "PROXY TCP6 " and two full IPv6 addresses and ports, with CRLF
/// (section 2.1).
inline constexpr size_t kProxyV1MaxBytes = 107;
/// The longest version 2 header the relay takes: the 16 fixed bytes and up to this many more
/// (addresses and TLVs; the 16-bit length allows 65,535). A balancer's TLVs (unique id, TLS
/// details, a cloud's endpoint id) take a few hundred bytes at most.
inline constexpr size_t kProxyV2MaxBytes = 16 + 4096;

/// Where reading a PROXY header stands after the bytes received so far.
struct ProxyHeaderParse {
  enum class Status {
    kNeedMore,  ///< a prefix of a header so far: read more (see `max_read`, `stop_after_newline`)
    kComplete,  ///< `header` holds it; the header is exactly the first header.length bytes
    kInvalid,   ///< not a PROXY header, or a malformed or oversized one (`error` says which)
  };
  Status status = Status::kNeedMore;
  /// kNeedMore: how many more bytes may be read without reading past the end of the header
  /// (bytes past it are the client's SSH stream and must stay in the socket). With
  /// `stop_after_newline` (version 1), the header ends at the first '\n' of those bytes: peek
  /// (recv MSG_PEEK) and take up to that '\n', never more.
  size_t max_read = 0;
  bool stop_after_newline = false;
  ProxyHeader header;  ///< kComplete
  std::string error;   ///< kInvalid: a short English reason without the input's bytes
};

/// Reads a PROXY header at the start of `bytes`, all received so far on the connection. Strict:
/// version 1 is "PROXY" SP ("TCP4" | "TCP6") SP source SP destination SP port SP port CRLF with
/// single spaces, addresses of the named family (inet_pton), ports 0–65535 in decimal, or
/// "PROXY UNKNOWN" up to CRLF, all in at most 107 bytes; version 2 is the 12-byte signature,
/// version 2, command LOCAL or PROXY, family UNSPEC, INET or INET6 over STREAM (UNIX and DGRAM
/// are refused: no TCP client to name), a length that holds the family's addresses and at most
/// kProxyV2MaxBytes in all, then TLVs (type, 16-bit length, value), each skipped but required to
/// fit. Anything else is kInvalid as soon as the first byte that cannot belong to a header
/// arrives (an SSH client's "SSH-2.0-…" fails at its first byte). Pure; never reads past
/// `bytes`.
ProxyHeaderParse ParseProxyHeader(std::string_view bytes);

}  // namespace gpuwerk::relay
