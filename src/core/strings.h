#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuwerk::core {

/// Space and horizontal tab: the blanks of header fields (HTTP's OWS, RFC 9110 §5.6.3; RFC 5322
/// WSP) and of SSH key lines. Trim's default.
inline constexpr std::string_view kBlanks = " \t";
/// Every ASCII whitespace character (what std::isspace accepts in the "C" locale).
inline constexpr std::string_view kWhitespace = " \t\n\v\f\r";

/// `s` without the leading and trailing characters that are in `chars`. The result views `s`.
constexpr std::string_view Trim(std::string_view s, std::string_view chars = kBlanks) {
  const size_t first = s.find_first_not_of(chars);
  if (first == std::string_view::npos) return s.substr(s.size());
  return s.substr(first, s.find_last_not_of(chars) - first + 1);
}

/// `s` without the trailing characters that are in `chars`. The result views `s`.
constexpr std::string_view TrimEnd(std::string_view s, std::string_view chars = kBlanks) {
  const size_t last = s.find_last_not_of(chars);
  return last == std::string_view::npos ? s.substr(0, 0) : s.substr(0, last + 1);
}

/// Whether a person-supplied text field (a name, a description, a key comment) may not hold code
/// point `cp`: C0 and C1 controls and DEL (U+0000–U+001F, U+007F–U+009F, NEL U+0085 among them),
/// every Bidi_Control character (the Arabic letter mark U+061C, the marks U+200E–U+200F,
/// embeddings and overrides U+202A–U+202E, isolates U+2066–U+2069), the line and paragraph
/// separators (U+2028, U+2029), and the characters that show as nothing: the soft hyphen U+00AD,
/// the Mongolian vowel separator U+180E, zero-width space and joiners U+200B–U+200D, the word
/// joiner and invisible operators U+2060–U+2064, the deprecated format characters U+206A–U+206F,
/// the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the zero-width no-break space (byte-order
/// mark) U+FEFF, the interlinear annotation marks U+FFF9–U+FFFB and the tag characters
/// U+E0000–U+E007F (Unicode 15, UAX #9 and the Default_Ignorable_Code_Point property). They would
/// make a listing, a log line or an authorized_keys line show other text than it holds. Variation
/// selectors stay allowed (emoji need them). The one check for this; callers refuse or replace
/// what it finds.
constexpr bool IsUnsafeTextCodePoint(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0xad || cp == 0x61c || cp == 0x115f ||
         cp == 0x1160 || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
         (cp >= 0x2066 && cp <= 0x206f) || cp == 0x2028 || cp == 0x2029 || cp == 0x3164 ||
         cp == 0xfeff || cp == 0xffa0 || (cp >= 0xfff9 && cp <= 0xfffb) ||
         (cp >= 0xe0000 && cp <= 0xe007f);
}

/// Whether UTF-8 `text` holds a code point IsUnsafeTextCodePoint refuses. Bytes that do not
/// start a valid sequence are skipped (validity is the JSON parser's or the caller's check).
constexpr bool HasUnsafeText(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80             ? 1
                 : (c & 0xe0) == 0xc0 ? 2
                 : (c & 0xf0) == 0xe0 ? 3
                 : (c & 0xf8) == 0xf0 ? 4
                                      : 0;
    if (len == 0 || i + len > text.size()) {
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3f);
    }
    if (IsUnsafeTextCodePoint(cp)) return true;
    i += len;
  }
  return false;
}

/// How many bytes of escaped text BoundedPrintable shows by default before it cuts.
inline constexpr size_t kPrintableBytes = 256;

/// Outside text (an SSH user name, a key comment, an instance name, a user agent, a peer's error
/// message) in the one form gpuwerk writes it into a log line, an audit detail or a banner line
/// (DESIGN.md R-19): printable, one line, bounded.
/// - Well-formed UTF-8 that is safe (IsUnsafeTextCodePoint) stays as it is, so names in any
///   script still read, except `\` and `"`, which become `\\` and `\"`: the result can stand
///   between double quotes, and an escape cannot be faked.
/// - `\n`, `\r` and `\t` are written so; other unsafe code points below U+0080 as `\xNN` (ESC is
///   `\x1b`, NUL `\x00`), the others as `\u{NNNN}` (U+202E is `\u{202e}`); a byte that does not
///   start a well-formed sequence (RFC 3629) as `\xNN` (always 80 or above).
/// - At most `max_bytes` bytes of that, never cutting an escape or a character; when text is
///   left over, `…[N bytes]` follows, N being the length of `text` in bytes.
/// So the result holds no control character, no direction mark and no line break, and is at most
/// `max_bytes` + 31 bytes long whatever `text` is. Thread-safe.
std::string BoundedPrintable(std::string_view text, size_t max_bytes = kPrintableBytes);

/// Whether `text` is already in the form BoundedPrintable(…, max_bytes) writes: well-formed UTF-8
/// without a code point IsUnsafeTextCodePoint refuses and without a bare `"`; every `\` starts
/// one of its escapes (`\\`, `\"`, `\n`, `\r`, `\t`, `\xNN`, `\u{NNNN}` with 4 to 6 hex digits,
/// lower case); at most `max_bytes` bytes of that, optionally followed by `…[N bytes]`. Text
/// that passes reads the same printed as it is, so a receiver may keep it as it is instead of
/// escaping it a second time (docs/ssh.md "Outside text": a relay's refusal reports carry the
/// user name escaped once, by the relay). Thread-safe.
bool IsBoundedPrintable(std::string_view text, size_t max_bytes = kPrintableBytes);

/// `text` with every code point IsUnsafeTextCodePoint refuses (controls, direction marks,
/// zero-width characters, line separators) and every byte that does not start a well-formed
/// UTF-8 sequence replaced by `replacement`; everything else as it is. For output that must
/// stay one line and read as it is, without escapes (the CLI's tables and messages:
/// cli::SafeText). Thread-safe.
std::string ReplaceUnsafeText(std::string_view text, std::string_view replacement);

}  // namespace gpuwerk::core
