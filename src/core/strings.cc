#include "core/strings.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuwerk::core {
namespace {

/// A code point and the length of the UTF-8 sequence that encodes it; `length` 0: not one.
struct Decoded {
  char32_t code_point = 0;
  size_t length = 0;
};

/// The well-formed UTF-8 sequence (RFC 3629: no overlong forms, surrogates or code points above
/// U+10FFFF) at the start of non-empty `s`.
Decoded DecodeUtf8(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return {b0, 1};
  size_t length = 0;
  char32_t cp = 0;
  char32_t smallest = 0;
  if ((b0 & 0xe0) == 0xc0) {
    length = 2, cp = b0 & 0x1f, smallest = 0x80;
  } else if ((b0 & 0xf0) == 0xe0) {
    length = 3, cp = b0 & 0x0f, smallest = 0x800;
  } else if ((b0 & 0xf8) == 0xf0) {
    length = 4, cp = b0 & 0x07, smallest = 0x10000;
  } else {
    return {};
  }
  if (s.size() < length) return {};
  for (size_t k = 1; k < length; ++k) {
    const auto b = static_cast<unsigned char>(s[k]);
    if ((b & 0xc0) != 0x80) return {};
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < smallest || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return {};
  return {cp, length};
}

}  // namespace

std::string BoundedPrintable(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  std::string escaped;
  size_t i = 0;
  while (i < text.size()) {
    const Decoded d = DecodeUtf8(text.substr(i));
    std::string_view piece;
    if (d.length == 0) {
      escaped = fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      piece = escaped;
    } else if (d.code_point == '\\') {
      piece = "\\\\";
    } else if (d.code_point == '"') {
      piece = "\\\"";
    } else if (d.code_point == '\n') {
      piece = "\\n";
    } else if (d.code_point == '\r') {
      piece = "\\r";
    } else if (d.code_point == '\t') {
      piece = "\\t";
    } else if (IsUnsafeTextCodePoint(d.code_point)) {
      escaped = d.code_point < 0x80
                    ? fmt::format("\\x{:02x}", static_cast<unsigned>(d.code_point))
                    : fmt::format("\\u{{{:04x}}}", static_cast<unsigned>(d.code_point));
      piece = escaped;
    } else {
      piece = text.substr(i, d.length);
    }
    if (out.size() + piece.size() > max_bytes) {
      out += fmt::format("…[{} bytes]", text.size());
      return out;
    }
    out += piece;
    i += d.length == 0 ? 1 : d.length;
  }
  return out;
}

}  // namespace gpuwerk::core
