#include "core/keyset.h"

#include <charconv>

namespace gpuwerk::core {
namespace {

Error BadCursor() {
  return Error(ErrorCode::kInvalidArgument, "invalid_cursor",
               "The cursor is not one this server gave: use the next or prev cursor of a page as "
               "it came, or leave both out for the newest page.");
}

bool IdChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; }

}  // namespace

std::string FormatKeyset(const KeysetKey& key) { return std::to_string(key.at) + "." + key.id; }

Result<KeysetKey> ParseKeyset(std::string_view text) {
  const size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 19 || dot + 1 == text.size() ||
      text.size() - dot - 1 > 64) {
    return Fail(BadCursor());
  }
  KeysetKey key;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + dot, key.at);
  if (ec != std::errc() || ptr != text.data() + dot || key.at < 0) return Fail(BadCursor());
  key.id = std::string(text.substr(dot + 1));
  for (char c : key.id) {
    if (!IdChar(c)) return Fail(BadCursor());
  }
  return key;
}

Result<KeysetQuery> ParseKeysetQuery(std::string_view before, std::string_view after) {
  if (!before.empty() && !after.empty()) return Fail(BadCursor());
  KeysetQuery q;
  if (!before.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(q.before, ParseKeyset(before));
  }
  if (!after.empty()) {
    GPUWERK_ASSIGN_OR_RETURN(q.after, ParseKeyset(after));
  }
  return q;
}

}  // namespace gpuwerk::core
