#include "keys/key_name.h"

namespace gpuwerk::keys {
namespace {

bool IsWhitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_' || c == ' ';
}

}  // namespace

core::Result<std::string> ValidateKeyName(std::string_view name) {
  while (!name.empty() && IsWhitespace(name.front())) name.remove_prefix(1);
  while (!name.empty() && IsWhitespace(name.back())) name.remove_suffix(1);
  if (name.empty()) {
    return core::InvalidArgument("invalid_name", "A key name is required.");
  }
  if (name.size() > kMaxKeyNameLength) {
    return core::InvalidArgument("invalid_name", "A key name can have at most 64 characters.");
  }
  for (char c : name) {
    if (!IsNameChar(c)) {
      return core::InvalidArgument(
          "invalid_name", "A key name may only contain letters, digits, spaces, '.', '-' and '_'.");
    }
  }
  return std::string(name);
}

}  // namespace gpuwerk::keys
