#include "cli/internal/relay_session_table.h"

#include <cstdio>
#include <iterator>

#include "cli/output.h"

namespace gpuwerk::cli::internal {

using core::ErrorCode;
using nlohmann::json;

namespace {

/// "512 B", "3.4 KiB", "1.2 MiB", "7.0 GiB".
std::string ByteText(const json& bytes) {
  if (!bytes.is_number_integer()) return "";
  const double b = static_cast<double>(bytes.get<int64_t>());
  if (b < 1024) return std::to_string(bytes.get<int64_t>()) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = b / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace

void PrintRelaySessions(VerbContext& ctx, const json& page, int page_number, bool with_person) {
  if (PrintJsonIfAsked(ctx, page)) return;
  const json& items = Field(page, "items");
  const int64_t total = Field(page, "total").is_number_integer() ? page["total"].get<int64_t>() : 0;
  const int64_t pages = Field(page, "pages").is_number_integer() ? page["pages"].get<int64_t>() : 1;
  if (!items.is_array() || items.empty()) {
    Print(ctx, total == 0 ? "No relay sessions.\n"
                          : "No relay sessions on page " + std::to_string(page_number) + " (" +
                                std::to_string(total) + " relay sessions on " +
                                std::to_string(pages) + (pages == 1 ? " page" : " pages") + ").\n");
    return;
  }
  std::vector<std::string> header = {"STARTED", "DURATION", "FROM", "KEY", "LOGIN"};
  if (with_person) header.insert(header.begin() + 1, {"PERSON", "INSTANCE", "RELAY"});
  for (const char* h : {"UP", "DOWN", "END"}) header.push_back(h);
  Table table(header);
  for (const auto& r : items) {
    std::vector<std::string> row = {
        CellText(Field(r, "started_at")), SafeText(DurationText(Field(r, "duration_seconds"))),
        CellText(Field(r, "source_address")), CellText(Field(r, "key_fingerprint")),
        CellText(Field(r, "login"))};
    if (with_person) {
      row.insert(row.begin() + 1, {Str(r, "email").empty() ? CellText(Field(r, "person_id"))
                                                           : CellText(Field(r, "email")),
                                   CellText(Field(r, "hostname")), CellText(Field(r, "relay"))});
    }
    row.push_back(SafeText(ByteText(Field(r, "bytes_from_client"))));
    row.push_back(SafeText(ByteText(Field(r, "bytes_to_client"))));
    row.push_back(Field(r, "open").is_boolean() && r["open"].get<bool>()
                      ? std::string("(open)")
                      : CellText(Field(r, "end_reason")));
    table.AddRow(row);
  }
  std::string out = table.Render();
  out += "Page " + std::to_string(page_number) + " of " + std::to_string(pages) + ", " +
         std::to_string(total) + " relay session" + (total == 1 ? "" : "s") + ", newest first";
  if (page_number < pages) out += "; next: --page " + std::to_string(page_number + 1);
  Print(ctx, out + ".\n");
}

core::Result<void> CheckPage(int page_number) {
  if (page_number < 1) {
    return core::Fail(ErrorCode::kInvalidArgument, "invalid_page",
                      "--page must be a whole number from 1");
  }
  return {};
}

}  // namespace gpuwerk::cli::internal
