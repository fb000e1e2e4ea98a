#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace gpuwerk::store {

/// A SQL parameter or column value: NULL, a 64-bit integer, a double or text.
/// Times are stored as BIGINT Unix seconds, money as BIGINT minor units, ids as TEXT.
using Value = std::variant<std::monostate, int64_t, double, std::string>;

/// SQL NULL as a Value.
inline constexpr std::monostate kNull{};

/// One result row. Accessors check the column index and type; a NULL read as text gives "".
class Row {
 public:
  explicit Row(std::vector<Value> values) : values_(std::move(values)) {}
  size_t size() const { return values_.size(); }
  bool IsNull(size_t i) const { return std::holds_alternative<std::monostate>(values_.at(i)); }
  /// Text value of column i ("" for NULL; numbers are formatted).
  std::string Text(size_t i) const;
  /// Integer value of column i (0 for NULL; text is parsed).
  int64_t Int(size_t i) const;
  /// Text, or nullopt for NULL.
  std::optional<std::string> OptText(size_t i) const;
  /// Integer, or nullopt for NULL.
  std::optional<int64_t> OptInt(size_t i) const;

 private:
  std::vector<Value> values_;
};

/// Converts an optional to a Value (nullopt → NULL).
template <class T>
Value Nullable(const std::optional<T>& v) {
  if (!v) return kNull;
  return Value(*v);
}

}  // namespace gpuwerk::store
