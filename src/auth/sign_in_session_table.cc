#include "auth/sign_in_session_table.h"

namespace gpuwerk::auth {
namespace {

constexpr char kSelect[] =
    "SELECT token_hash, person_id, created_at, expires_at, source_address FROM sign_in_sessions ";

SignInSessionRow FromRow(const store::Row& row) {
  return SignInSessionRow{.token_hash = row.Text("token_hash"),
                          .person_id = row.Text("person_id"),
                          .created_at = row.Int("created_at"),
                          .expires_at = row.Int("expires_at"),
                          .source_address = row.Text("source_address")};
}

}  // namespace

core::Result<void> SignInSessionTable::Insert(store::Transaction& tx, const SignInSessionRow& row) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO sign_in_sessions (token_hash, person_id, created_at, expires_at, "
              "source_address) VALUES (?, ?, ?, ?, ?)",
              {row.token_hash, row.person_id, row.created_at, row.expires_at, row.source_address}));
  return {};
}

core::Result<std::optional<SignInSessionRow>> SignInSessionTable::Find(
    store::Transaction& tx, const std::string& token_hash) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne(std::string(kSelect) + "WHERE token_hash = ?", {token_hash}));
  if (!row) return std::optional<SignInSessionRow>();
  return FromRow(*row);
}

core::Result<std::optional<SignInSessionRow>> SignInSessionTable::FindUnexpired(
    store::Transaction& tx, const std::string& token_hash, int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne(std::string(kSelect) + "WHERE token_hash = ? AND expires_at > ?",
                            {token_hash, now}));
  if (!row) return std::optional<SignInSessionRow>();
  return FromRow(*row);
}

core::Result<bool> SignInSessionTable::Delete(store::Transaction& tx,
                                              const std::string& token_hash) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("DELETE FROM sign_in_sessions WHERE token_hash = ?", {token_hash}));
  return n > 0;
}

core::Result<int64_t> SignInSessionTable::DeleteAllOf(store::Transaction& tx,
                                                      const std::string& person_id,
                                                      const std::string& keep_hash) {
  return tx.Exec("DELETE FROM sign_in_sessions WHERE person_id = ? AND token_hash <> ?",
                 {person_id, keep_hash});
}

}  // namespace gpuwerk::auth
