#include "teams/team_member_table.h"

namespace gpuwerk::teams {
namespace {

constexpr char kSelect[] =
    "SELECT id, team_id, person_id, role, joined_at, ended_at, ended_how, ended_by FROM "
    "team_members ";

MembershipRow FromRow(const store::Row& row) {
  return MembershipRow{.id = row.Text("id"),
                       .team_id = row.Text("team_id"),
                       .person_id = row.Text("person_id"),
                       .role = ParseRole(row.Text("role")).value_or(Role::kMember),
                       .joined_at = row.Int("joined_at"),
                       .ended_at = row.OptInt("ended_at"),
                       .ended_how = row.Text("ended_how"),
                       .ended_by = row.Text("ended_by")};
}

core::Result<std::vector<MembershipRow>> List(store::Transaction& tx, const std::string& where,
                                              const std::string& team_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query(std::string(kSelect) + where + " ORDER BY joined_at, id", {team_id}));
  std::vector<MembershipRow> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(FromRow(r));
  return out;
}

}  // namespace

std::string_view RoleName(Role role) { return role == Role::kOwner ? "owner" : "member"; }

std::optional<Role> ParseRole(std::string_view name) {
  if (name == "owner") return Role::kOwner;
  if (name == "member") return Role::kMember;
  return std::nullopt;
}

core::Result<void> TeamMemberTable::Insert(store::Transaction& tx, const MembershipRow& row) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO team_members (id, team_id, person_id, role, joined_at) VALUES (?, ?, ?, ?, ?)",
      {row.id, row.team_id, row.person_id, std::string(RoleName(row.role)), row.joined_at}));
  return {};
}

core::Result<std::optional<MembershipRow>> TeamMemberTable::ActiveOf(store::Transaction& tx,
                                                                     const std::string& person_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne(std::string(kSelect) + "WHERE person_id = ? AND ended_at IS NULL", {person_id}));
  if (!row) return std::optional<MembershipRow>();
  return FromRow(*row);
}

core::Result<std::vector<MembershipRow>> TeamMemberTable::ListActive(store::Transaction& tx,
                                                                     const std::string& team_id) {
  return List(tx, "WHERE team_id = ? AND ended_at IS NULL", team_id);
}

core::Result<std::vector<MembershipRow>> TeamMemberTable::ListAll(store::Transaction& tx,
                                                                  const std::string& team_id) {
  return List(tx, "WHERE team_id = ?", team_id);
}

core::Result<int64_t> TeamMemberTable::CountOwners(store::Transaction& tx,
                                                   const std::string& team_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM team_members WHERE "
                                                 "team_id = ? AND role = 'owner' AND ended_at IS "
                                                 "NULL",
                                                 {team_id}));
  return row ? row->Int("n") : 0;
}

core::Result<bool> TeamMemberTable::End(store::Transaction& tx, const std::string& id, int64_t at,
                                        std::string_view how, const std::string& by) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("UPDATE team_members SET ended_at = ?, ended_how = ?, ended_by = ? WHERE "
                         "id = ? AND ended_at IS NULL",
                         {at, std::string(how), by, id}));
  return n == 1;
}

core::Result<bool> TeamMemberTable::SetRole(store::Transaction& tx, const std::string& id,
                                            Role role) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("UPDATE team_members SET role = ? WHERE id = ? AND ended_at IS NULL",
                         {std::string(RoleName(role)), id}));
  return n == 1;
}

}  // namespace gpuwerk::teams
