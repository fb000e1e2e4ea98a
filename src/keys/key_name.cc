#include "keys/key_name.h"

#include "core/strings.h"

namespace gpuwerk::keys {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_' || c == ' ';
}

}  // namespace

core::Result<std::string> ValidateKeyName(std::string_view name) {
  name = core::Trim(name, core::kWhitespace);
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
