#include "access/relay_credential_table.h"

namespace gpuwerk::access {
namespace {

constexpr char kSelect[] =
    "SELECT id, name, token_hash, prefix, created_by, created_at, last_used_at "
    "FROM relay_credentials ";

RelayCredentialRow FromRow(const store::Row& row) {
  return RelayCredentialRow{
      .credential = RelayCredential{.id = row.Text("id"),
                                    .name = row.Text("name"),
                                    .prefix = row.Text("prefix"),
                                    .created_by = row.Text("created_by"),
                                    .created_at = row.Int("created_at"),
                                    .last_used_at = row.OptInt("last_used_at")},
      .token_hash = row.Text("token_hash")};
}

core::Result<std::optional<RelayCredentialRow>> FindWhere(store::Transaction& tx,
                                                          const std::string& where,
                                                          const std::string& value) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(std::string(kSelect) + where, {value}));
  if (!row) return std::optional<RelayCredentialRow>();
  return FromRow(*row);
}

}  // namespace

core::Result<void> RelayCredentialTable::Insert(store::Transaction& tx,
                                                const RelayCredentialRow& row) {
  const RelayCredential& c = row.credential;
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO relay_credentials (id, name, token_hash, prefix, created_by, created_at) "
      "VALUES (?, ?, ?, ?, ?, ?)",
      {c.id, c.name, row.token_hash, c.prefix, c.created_by, c.created_at}));
  return {};
}

core::Result<std::optional<RelayCredentialRow>> RelayCredentialTable::FindByHash(
    store::Transaction& tx, const std::string& token_hash) {
  return FindWhere(tx, "WHERE token_hash = ?", token_hash);
}

core::Result<std::optional<RelayCredentialRow>> RelayCredentialTable::FindByName(
    store::Transaction& tx, const std::string& name) {
  return FindWhere(tx, "WHERE name = ?", name);
}

core::Result<std::pair<std::vector<RelayCredential>, int64_t>> RelayCredentialTable::Page(
    store::Transaction& tx, int64_t limit, int64_t offset) {
  GPUWERK_ASSIGN_OR_RETURN(auto count, tx.QueryOne("SELECT COUNT(*) FROM relay_credentials"));
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query(std::string(kSelect) + "ORDER BY name LIMIT ? OFFSET ?", {limit, offset}));
  std::vector<RelayCredential> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(FromRow(r).credential);
  return std::pair{std::move(out), count ? count->Int(0) : int64_t{0}};
}

core::Result<bool> RelayCredentialTable::Replace(store::Transaction& tx, const std::string& id,
                                                 const std::string& token_hash,
                                                 const std::string& prefix, int64_t created_at) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("UPDATE relay_credentials SET token_hash = ?, prefix = ?, created_at = ?, "
                         "last_used_at = NULL WHERE id = ?",
                         {token_hash, prefix, created_at, id}));
  return n > 0;
}

core::Result<void> RelayCredentialTable::Touch(store::Transaction& tx, const std::string& id,
                                               int64_t now) {
  GPUWERK_TRY(tx.Exec("UPDATE relay_credentials SET last_used_at = ? WHERE id = ?", {now, id}));
  return {};
}

core::Result<bool> RelayCredentialTable::Delete(store::Transaction& tx, const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(int64_t n, tx.Exec("DELETE FROM relay_credentials WHERE id = ?", {id}));
  return n > 0;
}

}  // namespace gpuwerk::access
