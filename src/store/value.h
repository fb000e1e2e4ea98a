#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gpuwerk::store {

/// A SQL parameter or column value: NULL, a 64-bit integer, a double or text.
/// Times are stored as BIGINT Unix seconds, money as BIGINT minor units, ids as TEXT.
using Value = std::variant<std::monostate, int64_t, double, std::string>;

/// SQL NULL as a Value.
inline constexpr std::monostate kNull{};

/// The column names of a result, shared by its rows (the backend keeps one per statement).
using ColumnNames = std::shared_ptr<const std::vector<std::string>>;

/// One result row. Columns are read by name (`row.Text("hostname")`, the name a SELECT gives the
/// column, `AS` included) or by index. Accessors check the column and the type: an unknown name
/// or an index past the end is a bug and throws std::out_of_range. A NULL read as text gives "".
class Row {
 public:
  explicit Row(std::vector<Value> values, ColumnNames names = nullptr)
      : values_(std::move(values)), names_(std::move(names)) {}
  size_t size() const { return values_.size(); }
  bool IsNull(size_t i) const { return std::holds_alternative<std::monostate>(values_.at(i)); }
  bool IsNull(std::string_view column) const { return IsNull(Index(column)); }
  /// Text of the named column ("" for NULL; numbers are formatted).
  std::string Text(std::string_view column) const { return Text(Index(column)); }
  /// Integer of the named column (0 for NULL; text is parsed).
  int64_t Int(std::string_view column) const { return Int(Index(column)); }
  /// Text of the named column, or nullopt for NULL.
  std::optional<std::string> OptText(std::string_view column) const {
    return OptText(Index(column));
  }
  /// Integer of the named column, or nullopt for NULL.
  std::optional<int64_t> OptInt(std::string_view column) const { return OptInt(Index(column)); }
  /// The index of the named column. Throws std::out_of_range when the result has no such column.
  size_t Index(std::string_view column) const;
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
  ColumnNames names_;
};

/// Converts an optional to a Value (nullopt → NULL).
template <class T>
Value Nullable(const std::optional<T>& v) {
  if (!v) return kNull;
  return Value(*v);
}

}  // namespace gpuwerk::store
