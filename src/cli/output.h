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

/// `text` with every character that could make a terminal show other text than it holds
/// replaced by '?' (core::ReplaceUnsafeText: C0 and C1 controls, DEL, ESC and line breaks; the
/// direction controls U+202A–U+202E, U+2066–U+2069, U+200E/F and U+061C; zero-width and other
/// invisible characters; bytes that are not well-formed UTF-8, such as a lone 8-bit CSI), for
/// one-line output of names and messages that came from the server or the command line.
std::string SafeText(std::string_view text);

/// The text of a JSON value for a table cell: strings as they are, null as "-", others dumped.
std::string CellText(const nlohmann::json& value);

/// Formats `value` for `--json`: pretty with 2-space indents, UTF-8 kept as is (invalid bytes
/// replaced), ending in "\n".
std::string RenderJson(const nlohmann::json& value);

/// Writes RenderJson(value) to `out`.
void PrintJson(std::ostream& out, const nlohmann::json& value);

}  // namespace gpuwerk::cli
