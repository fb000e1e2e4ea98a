#include "cli/output.h"

#include <algorithm>

#include "core/strings.h"

namespace gpuwerk::cli {
namespace {

/// Code points in UTF-8 `text` (bytes that are not continuation bytes).
size_t DisplayWidth(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

}  // namespace

std::string SafeText(std::string_view text) { return core::ReplaceUnsafeText(text, "?"); }

std::string CellText(const nlohmann::json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  const size_t columns = header_.size();
  std::vector<std::vector<std::string>> lines;
  lines.reserve(rows_.size() + 1);
  lines.push_back(header_);
  lines.insert(lines.end(), rows_.begin(), rows_.end());
  for (auto& line : lines) {
    for (auto& cell : line) cell = SafeText(cell);
  }

  std::vector<size_t> widths(columns, 0);
  for (const auto& line : lines) {
    for (size_t i = 0; i < columns; ++i) widths[i] = std::max(widths[i], DisplayWidth(line[i]));
  }

  std::string out;
  for (const auto& line : lines) {
    std::string text;
    for (size_t i = 0; i < columns; ++i) {
      text += line[i];
      if (i + 1 < columns) text.append(widths[i] - DisplayWidth(line[i]) + 2, ' ');
    }
    text.resize(core::TrimEnd(text, " ").size());
    out += text;
    out += '\n';
  }
  return out;
}

std::string RenderJson(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void PrintJson(std::ostream& out, const nlohmann::json& value) {
  out << RenderJson(value);
  out.flush();
}

}  // namespace gpuwerk::cli
