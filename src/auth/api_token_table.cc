#include "auth/api_token_table.h"

namespace gpuwerk::auth {
namespace {

constexpr char kSelect[] =
    "SELECT id, person_id, name, token_hash, prefix, created_at, last_used_at, expires_at "
    "FROM api_tokens ";

ApiTokenRow FromRow(const store::Row& row) {
  return ApiTokenRow{.token = ApiToken{.id = row.Text("id"),
                                       .name = row.Text("name"),
                                       .prefix = row.Text("prefix"),
                                       .created_at = row.Int("created_at"),
                                       .last_used_at = row.OptInt("last_used_at"),
                                       .expires_at = row.OptInt("expires_at")},
                     .person_id = row.Text("person_id"),
                     .token_hash = row.Text("token_hash")};
}

}  // namespace

core::Result<void> ApiTokenTable::Insert(store::Transaction& tx, const ApiTokenRow& row) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO api_tokens (id, person_id, name, token_hash, prefix, created_at, "
              "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
              {row.token.id, row.person_id, row.token.name, row.token_hash, row.token.prefix,
               row.token.created_at, store::Nullable(row.token.expires_at)}));
  return {};
}

core::Result<std::optional<ApiTokenHolder>> ApiTokenTable::FindHolder(
    store::Transaction& tx, const std::string& token_hash) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT t.id, t.last_used_at, t.expires_at, p.id AS person_id, p.email, "
                  "p.is_operator, p.email_proven_at FROM api_tokens t JOIN persons p "
                  "ON p.id = t.person_id WHERE t.token_hash = ?",
                  {token_hash}));
  if (!row) return std::optional<ApiTokenHolder>();
  return ApiTokenHolder{.token_id = row->Text("id"),
                        .last_used_at = row->OptInt("last_used_at"),
                        .expires_at = row->OptInt("expires_at"),
                        .person_id = row->Text("person_id"),
                        .email = row->Text("email"),
                        .is_operator = row->Int("is_operator") != 0,
                        .email_proven = !row->IsNull("email_proven_at")};
}

core::Result<std::vector<ApiToken>> ApiTokenTable::ListOf(store::Transaction& tx,
                                                          const std::string& person_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query(std::string(kSelect) + "WHERE person_id = ? ORDER BY created_at, id", {person_id}));
  std::vector<ApiToken> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(FromRow(r).token);
  return out;
}

core::Result<void> ApiTokenTable::Touch(store::Transaction& tx, const std::string& id,
                                        int64_t now) {
  GPUWERK_TRY(tx.Exec("UPDATE api_tokens SET last_used_at = ? WHERE id = ?", {now, id}));
  return {};
}

core::Result<bool> ApiTokenTable::Delete(store::Transaction& tx, const std::string& person_id,
                                         const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("DELETE FROM api_tokens WHERE id = ? AND person_id = ?", {id, person_id}));
  return n > 0;
}

core::Result<int64_t> ApiTokenTable::DeleteAllOf(store::Transaction& tx,
                                                 const std::string& person_id,
                                                 const std::string& keep_id) {
  return tx.Exec("DELETE FROM api_tokens WHERE person_id = ? AND id <> ?", {person_id, keep_id});
}

}  // namespace gpuwerk::auth
