#include "core/host_address.h"

#include <arpa/inet.h>

#include <string>

namespace gpuwerk::core {
namespace {

bool IsDnsName(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return false;
  size_t label = 0;  // characters in the current label
  char previous = '.';
  for (char c : name) {
    if (c == '.') {
      if (label == 0 || previous == '-') return false;
      label = 0;
    } else {
      const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (!alnum && c != '-') return false;
      if (c == '-' && label == 0) return false;
      if (++label > 63) return false;
    }
    previous = c;
  }
  return previous != '-';
}

}  // namespace

bool IsHostAddress(std::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  const std::string s(text);
  unsigned char buffer[16];
  if (s.find(':') != std::string::npos) return ::inet_pton(AF_INET6, s.c_str(), buffer) == 1;
  if (::inet_pton(AF_INET, s.c_str(), buffer) == 1) return true;
  return IsDnsName(text);
}

}  // namespace gpuwerk::core
