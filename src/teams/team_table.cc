#include "teams/team_table.h"

namespace gpuwerk::teams {
namespace {

constexpr char kSelect[] = "SELECT id, name, created_by, created_at FROM teams ";

TeamRow FromRow(const store::Row& row) {
  return TeamRow{.id = row.Text("id"),
                 .name = row.Text("name"),
                 .created_by = row.Text("created_by"),
                 .created_at = row.Int("created_at")};
}

core::Result<std::optional<TeamRow>> FindWhere(store::Transaction& tx, const char* where,
                                               const std::string& value) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(std::string(kSelect) + where, {value}));
  if (!row) return std::optional<TeamRow>();
  return FromRow(*row);
}

}  // namespace

core::Result<void> TeamTable::Insert(store::Transaction& tx, const TeamRow& row,
                                     const std::string& name_norm) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO teams (id, name, name_norm, created_by, created_at) VALUES (?, ?, ?, ?, ?)",
      {row.id, row.name, name_norm, row.created_by, row.created_at}));
  return {};
}

core::Result<std::optional<TeamRow>> TeamTable::Find(store::Transaction& tx,
                                                     const std::string& id) {
  return FindWhere(tx, "WHERE id = ?", id);
}

core::Result<std::optional<TeamRow>> TeamTable::FindByName(store::Transaction& tx,
                                                           const std::string& name_norm) {
  return FindWhere(tx, "WHERE name_norm = ?", name_norm);
}

}  // namespace gpuwerk::teams
