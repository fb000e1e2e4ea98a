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

namespace {

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/// The length of the one piece BoundedPrintable writes at the start of non-empty `s` (a kept
/// character or one escape); 0 when no piece starts there.
size_t PrintablePiece(std::string_view s) {
  if (s[0] == '\\') {
    if (s.size() < 2) return 0;
    switch (s[1]) {
      case '\\':
      case '"':
      case 'n':
      case 'r':
      case 't':
        return 2;
      case 'x':
        return s.size() >= 4 && IsLowerHex(s[2]) && IsLowerHex(s[3]) ? 4 : 0;
      case 'u': {
        if (s.size() < 3 || s[2] != '{') return 0;
        size_t digits = 0;
        while (3 + digits < s.size() && IsLowerHex(s[3 + digits])) ++digits;
        if (digits < 4 || digits > 6 || 3 + digits >= s.size() || s[3 + digits] != '}') return 0;
        return 4 + digits;
      }
      default:
        return 0;
    }
  }
  if (s[0] == '"') return 0;
  const Decoded d = DecodeUtf8(s);
  if (d.length == 0 || IsUnsafeTextCodePoint(d.code_point)) return 0;
  return d.length;
}

/// Whether all of `s` is pieces of BoundedPrintable's form, at most `max_bytes` of them.
bool IsPrintableBody(std::string_view s, size_t max_bytes) {
  if (s.size() > max_bytes) return false;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = PrintablePiece(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// The length of BoundedPrintable's cut mark `…[N bytes]` at the end of `s`; 0 when none.
size_t CutMarkLength(std::string_view s) {
  constexpr std::string_view kEnd = " bytes]";
  constexpr std::string_view kStart = "\u2026[";
  if (!s.ends_with(kEnd)) return 0;
  size_t i = s.size() - kEnd.size();
  size_t digits = 0;
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9' && digits < 20) --i, ++digits;
  if (digits == 0 || i < kStart.size() || s.substr(i - kStart.size(), kStart.size()) != kStart) {
    return 0;
  }
  return s.size() - (i - kStart.size());
}

}  // namespace

bool IsBoundedPrintable(std::string_view text, size_t max_bytes) {
  if (IsPrintableBody(text, max_bytes)) return true;
  const size_t mark = CutMarkLength(text);
  return mark != 0 && IsPrintableBody(text.substr(0, text.size() - mark), max_bytes);
}

std::string ReplaceUnsafeText(std::string_view text, std::string_view replacement) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const Decoded d = DecodeUtf8(text.substr(i));
    if (d.length == 0) {
      out += replacement;
      ++i;
    } else {
      if (IsUnsafeTextCodePoint(d.code_point)) {
        out += replacement;
      } else {
        out += text.substr(i, d.length);
      }
      i += d.length;
    }
  }
  return out;
}

}  // namespace gpuwerk::core
