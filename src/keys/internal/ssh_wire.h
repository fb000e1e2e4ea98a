#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

/// SSH wire-format primitives (RFC 4251 §5): `uint32` big-endian, `string` (uint32 length, then
/// that many bytes) and `mpint` (a string holding a two's-complement big-endian integer). Only
/// for use inside gpuwerk::keys.
namespace gpuwerk::keys::internal {

/// Reads fields from a byte buffer without copying. Every read checks the remaining length, so a
/// length prefix larger than what is left is a failed read, never an out-of-bounds access.
/// The returned views point into the buffer given to the constructor, which must outlive them.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : rest_(data) {}

  /// Reads one `string`; nullopt when the length prefix or the bytes are cut off.
  std::optional<std::string_view> ReadString();

  /// True when every byte has been consumed.
  bool AtEnd() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

/// Appends `bytes` to `out` as an SSH `string`.
void AppendString(std::string& out, std::string_view bytes);

/// Appends the non-negative integer whose big-endian magnitude is `magnitude` to `out` as an
/// SSH `mpint`: leading zero bytes dropped, one 0x00 added when the top bit is set.
void AppendMpint(std::string& out, std::string_view magnitude);

/// Checks that `mpint` (the contents of an SSH `mpint` string) is a positive integer in minimal
/// encoding; returns its big-endian magnitude without the sign byte, or nullopt.
std::optional<std::string_view> PositiveMpintMagnitude(std::string_view mpint);

/// Number of significant bits of the big-endian magnitude (which has no leading zero byte).
int BitLength(std::string_view magnitude);

}  // namespace gpuwerk::keys::internal
