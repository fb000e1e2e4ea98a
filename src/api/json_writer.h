#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuwerk::api {

/// Writes JSON text (RFC 8259) straight into a string, for hot routes that would otherwise build
/// an nlohmann::json tree only to serialise it. For valid UTF-8 the output is byte for byte what
/// `nlohmann::json::dump()` (compact, as Response::Json) gives for the same values: strings keep
/// UTF-8 as is and escape `"`, `\` and control characters; a byte that does not start a valid
/// UTF-8 sequence becomes U+FFFD. The caller keeps the structure balanced (every Begin has its End;
/// a Key precedes each object member); nothing checks it. Not thread-safe.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  /// The name of the next object member.
  JsonWriter& Key(std::string_view name);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  /// Key(name) then String(value), Int(value), … (the common member shapes).
  JsonWriter& Member(std::string_view name, std::string_view value) {
    return Key(name).String(value);
  }
  JsonWriter& Member(std::string_view name, const char* value) { return Key(name).String(value); }
  JsonWriter& Member(std::string_view name, int64_t value) { return Key(name).Int(value); }
  JsonWriter& Member(std::string_view name, int value) { return Key(name).Int(value); }
  JsonWriter& Member(std::string_view name, bool value) { return Key(name).Bool(value); }

  /// The text written so far; the writer is empty afterwards.
  std::string Take();

 private:
  /// Writes the comma before a value or member when one is due.
  void Separate();

  std::string out_;
  bool need_comma_ = false;
};

}  // namespace gpuwerk::api
