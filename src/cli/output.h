#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwerk::cli {

/// A plain-text table for people: a header row, then one line per row, columns left-aligned and
/// separated by at least two spaces, no trailing blanks. Widths count UTF-8 code points (wide
/// CJK characters and emoji count as one). Control characters in cells (newlines, ESC, …) are
/// shown as '?', so a crafted name cannot break the layout or drive the terminal.
class Table {
 public:
  explicit Table(std::vector<std::string> header);

  /// Adds a row; missing cells are blank, extra cells are dropped.
  void AddRow(std::vector<std::string> cells);

  /// The number of rows, header excluded.
  size_t size() const { return rows_.size(); }

  /// The whole table, each line ending in "\n".
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// `text` with control characters (C0, DEL, C1) replaced by '?', for one-line output of names
/// and messages that came from the server or the command line.
std::string SafeText(std::string_view text);

/// The text of a JSON value for a table cell: strings as they are, null as "-", others dumped.
std::string CellText(const nlohmann::json& value);

/// Formats `value` for `--json`: pretty with 2-space indents, UTF-8 kept as is (invalid bytes
/// replaced), ending in "\n".
std::string RenderJson(const nlohmann::json& value);

/// Writes RenderJson(value) to `out`.
void PrintJson(std::ostream& out, const nlohmann::json& value);

}  // namespace gpuwerk::cli
