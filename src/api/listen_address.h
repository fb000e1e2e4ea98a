#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpuwerk::api {

/// Splits a listen address, "HOST:PORT" or "[IPV6]:PORT" (an IPv6 literal in brackets, as in RFC
/// 3986's authority), into the host (without brackets) and the port (0 to 65535; 0: pick one).
/// Checks the form only: the host is not resolved. nullopt when malformed (no colon, no host, an
/// unbracketed IPv6 literal, a port that is not a number up to 65535). What HttpServer::Start
/// reads `Options::listen` with, and what the server's configuration is checked with first.
std::optional<std::pair<std::string, uint16_t>> SplitListenAddress(std::string_view listen);

}  // namespace gpuwerk::api
