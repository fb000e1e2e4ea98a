#pragma once

// Keyset paging (docs/api.md "Pages"): a list ordered newest first by (time, id) is paged by the
// key of a page's last row (`?before=`, the older rows) or first row (`?after=`, the newer rows),
// so a page holds still while rows arrive. The cursor text is "<unix seconds>.<id>".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::core {

/// A row's place in a (time, id) order: its time (Unix seconds, ≥ 0) and its id.
struct KeysetKey {
  int64_t at = 0;
  std::string id;  ///< lowercase letters, digits and '_' (the project's ids), 1–64 characters

  bool operator==(const KeysetKey&) const = default;
};

/// The cursor text of `key`: "<at>.<id>".
std::string FormatKeyset(const KeysetKey& key);

/// Parses FormatKeyset's text. Errors: kInvalidArgument "invalid_cursor" for anything else (no
/// dot, a negative or non-decimal time, an id that is empty, longer than 64 characters or holds a
/// character other than [a-z0-9_]).
Result<KeysetKey> ParseKeyset(std::string_view text);

/// What a keyset-paged request asks for: the rows older than `before`, else newer than `after`
/// (the nearest page of them), else the newest page.
struct KeysetQuery {
  std::optional<KeysetKey> before;
  std::optional<KeysetKey> after;
};

/// The query from the `before` and `after` parameters ("" when absent). Errors: invalid_cursor
/// (both given, or one malformed).
Result<KeysetQuery> ParseKeysetQuery(std::string_view before, std::string_view after);

}  // namespace gpuwerk::core
