#include "teams/team_invite_table.h"

namespace gpuwerk::teams {
namespace {

constexpr char kSelect[] =
    "SELECT id, team_id, email, email_norm, token_hash, invited_by, created_at, sent_at, "
    "expires_at, state, ended_at, accepted_by FROM team_invites ";

InviteRow FromRow(const store::Row& row) {
  return InviteRow{.id = row.Text("id"),
                   .team_id = row.Text("team_id"),
                   .email = row.Text("email"),
                   .email_norm = row.Text("email_norm"),
                   .token_hash = row.Text("token_hash"),
                   .invited_by = row.Text("invited_by"),
                   .created_at = row.Int("created_at"),
                   .sent_at = row.Int("sent_at"),
                   .expires_at = row.Int("expires_at"),
                   .state = row.Text("state"),
                   .ended_at = row.OptInt("ended_at"),
                   .accepted_by = row.Text("accepted_by")};
}

core::Result<std::optional<InviteRow>> FindWhere(store::Transaction& tx, const std::string& where,
                                                 std::initializer_list<store::Value> params) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(std::string(kSelect) + where, params));
  if (!row) return std::optional<InviteRow>();
  return FromRow(*row);
}

}  // namespace

core::Result<void> TeamInviteTable::Insert(store::Transaction& tx, const InviteRow& row) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO team_invites (id, team_id, email, email_norm, token_hash, invited_by, "
      "created_at, sent_at, expires_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')",
      {row.id, row.team_id, row.email, row.email_norm, row.token_hash, row.invited_by,
       row.created_at, row.sent_at, row.expires_at}));
  return {};
}

core::Result<std::optional<InviteRow>> TeamInviteTable::Find(store::Transaction& tx,
                                                             const std::string& id) {
  return FindWhere(tx, "WHERE id = ?", {id});
}

core::Result<std::optional<InviteRow>> TeamInviteTable::FindByTokenHash(
    store::Transaction& tx, const std::string& token_hash) {
  return FindWhere(tx, "WHERE token_hash = ?", {token_hash});
}

core::Result<std::optional<InviteRow>> TeamInviteTable::FindPending(store::Transaction& tx,
                                                                    const std::string& team_id,
                                                                    const std::string& email_norm) {
  return FindWhere(tx, "WHERE team_id = ? AND email_norm = ? AND state = 'pending'",
                   {team_id, email_norm});
}

core::Result<std::vector<InviteRow>> TeamInviteTable::ListPending(store::Transaction& tx,
                                                                  const std::string& team_id,
                                                                  int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query(std::string(kSelect) + "WHERE team_id = ? AND state = 'pending' AND expires_at > ? "
                                      "ORDER BY created_at, id",
               {team_id, now}));
  std::vector<InviteRow> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(FromRow(r));
  return out;
}

core::Result<bool> TeamInviteTable::Resend(store::Transaction& tx, const std::string& id,
                                           const std::string& token_hash, int64_t sent_at,
                                           int64_t expires_at) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("UPDATE team_invites SET token_hash = ?, sent_at = ?, expires_at = ? "
                         "WHERE id = ? AND state = 'pending'",
                         {token_hash, sent_at, expires_at, id}));
  return n == 1;
}

core::Result<bool> TeamInviteTable::End(store::Transaction& tx, const std::string& id,
                                        std::string_view state, int64_t at,
                                        const std::string& accepted_by) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("UPDATE team_invites SET state = ?, ended_at = ?, accepted_by = ? "
                         "WHERE id = ? AND state = 'pending'",
                         {std::string(state), at, accepted_by, id}));
  return n == 1;
}

}  // namespace gpuwerk::teams
