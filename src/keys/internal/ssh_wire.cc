#include "keys/internal/ssh_wire.h"

namespace gpuwerk::keys::internal {

std::optional<std::string_view> WireReader::ReadString() {
  if (rest_.size() < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(rest_.data());
  const uint32_t len =
      (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  if (len > rest_.size() - 4) return std::nullopt;
  std::string_view value = rest_.substr(4, len);
  rest_.remove_prefix(4 + size_t{len});
  return value;
}

void AppendString(std::string& out, std::string_view bytes) {
  const auto len = static_cast<uint32_t>(bytes.size());
  out.push_back(static_cast<char>((len >> 24) & 0xff));
  out.push_back(static_cast<char>((len >> 16) & 0xff));
  out.push_back(static_cast<char>((len >> 8) & 0xff));
  out.push_back(static_cast<char>(len & 0xff));
  out.append(bytes);
}

void AppendMpint(std::string& out, std::string_view magnitude) {
  while (!magnitude.empty() && magnitude.front() == '\0') magnitude.remove_prefix(1);
  std::string value;
  if (!magnitude.empty() && (static_cast<unsigned char>(magnitude.front()) & 0x80) != 0) {
    value.push_back('\0');
  }
  value.append(magnitude);
  AppendString(out, value);
}

std::optional<std::string_view> PositiveMpintMagnitude(std::string_view mpint) {
  if (mpint.empty()) return std::nullopt;  // zero
  const auto first = static_cast<unsigned char>(mpint[0]);
  if ((first & 0x80) != 0) return std::nullopt;  // negative
  if (first == 0) {
    // A leading zero is only allowed (and then required) to keep the top bit clear.
    if (mpint.size() < 2 || (static_cast<unsigned char>(mpint[1]) & 0x80) == 0) {
      return std::nullopt;
    }
    mpint.remove_prefix(1);
  }
  return mpint;
}

int BitLength(std::string_view magnitude) {
  if (magnitude.empty()) return 0;
  int bits = static_cast<int>(magnitude.size() - 1) * 8;
  for (auto top = static_cast<unsigned char>(magnitude[0]); top != 0; top >>= 1) ++bits;
  return bits;
}

}  // namespace gpuwerk::keys::internal
