#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpuwerk::core {

/// Base64 (RFC 4648 §4, with padding) of `bytes`. libsodium underneath.
std::string Base64Encode(std::string_view bytes);
/// Base64url (RFC 4648 §5) without padding.
std::string Base64UrlEncode(std::string_view bytes);
/// Decodes standard base64 (padding required, no whitespace); nullopt when malformed.
std::optional<std::string> Base64Decode(std::string_view text);
/// SHA-256 of `bytes` (FIPS 180-4), 32 raw bytes. libsodium underneath.
std::string Sha256(std::string_view bytes);
/// Lowercase hex of `bytes`.
std::string HexEncode(std::string_view bytes);
/// `text` with & < > " ' replaced by character references, for HTML text and attribute values.
std::string HtmlEscape(std::string_view text);
/// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
/// above U+10FFFF). UTF8-CPP underneath.
bool IsValidUtf8(std::string_view text);
/// Compares two strings in time independent of their contents (libsodium sodium_memcmp).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace gpuwerk::core
