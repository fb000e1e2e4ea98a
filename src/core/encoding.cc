#include "core/encoding.h"

#include <sodium.h>
#include <utf8cpp/utf8.h>

namespace gpuwerk::core {
namespace {

std::string Encode(std::string_view bytes, int variant) {
  std::string out(sodium_base64_encoded_len(bytes.size(), variant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), variant);
  out.resize(out.size() - 1);  // drop the terminating NUL
  return out;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  return Encode(bytes, sodium_base64_VARIANT_ORIGINAL);
}

std::string Base64UrlEncode(std::string_view bytes) {
  return Encode(bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

std::optional<std::string> Base64Decode(std::string_view text) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  size_t len = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), nullptr, &len, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  out.resize(len);
  return out;
}

std::string Sha256(std::string_view bytes) {
  std::string out(crypto_hash_sha256_BYTES, '\0');
  crypto_hash_sha256(reinterpret_cast<unsigned char*>(out.data()),
                     reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return out;
}

std::string HexEncode(std::string_view bytes) {
  std::string out(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                 bytes.size());
  out.pop_back();
  return out;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view text) { return utf8::is_valid(text.begin(), text.end()); }

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace gpuwerk::core
