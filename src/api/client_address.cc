#include "api/client_address.h"

#include <string>

namespace gpuwerk::api {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string ClientAddress(std::string_view peer, std::span<const std::string_view> forwarded_for,
                          const TrustedProxies& trusted) {
  std::string client = CanonicalIp(peer);
  if (client.empty()) client = std::string(peer);  // not expected: the server gives a literal
  if (forwarded_for.empty() || !trusted.Contains(peer)) return client;
  // Right to left over the hops of every field, the last field first.
  std::string leftmost;
  for (auto field = forwarded_for.rbegin(); field != forwarded_for.rend(); ++field) {
    std::string_view rest = *field;
    while (true) {
      const size_t comma = rest.rfind(',');
      const std::string_view hop =
          TrimBlanks(comma == std::string_view::npos ? rest : rest.substr(comma + 1));
      std::string canonical = CanonicalIp(hop);
      if (canonical.empty()) return client;  // garbage: believe nothing
      if (!trusted.Contains(canonical)) return canonical;
      leftmost = std::move(canonical);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(0, comma);
    }
  }
  return leftmost;
}

}  // namespace gpuwerk::api
