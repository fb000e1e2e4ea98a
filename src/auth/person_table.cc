#include "auth/person_table.h"

namespace gpuwerk::auth {
namespace {

constexpr char kSelect[] =
    "SELECT id, email, email_norm, is_operator, password_hash, created_at FROM persons ";

PersonRow FromRow(const store::Row& row) {
  return PersonRow{.person = Person{.id = row.Text("id"),
                                    .email = row.Text("email"),
                                    .is_operator = row.Int("is_operator") != 0,
                                    .has_password = !row.IsNull("password_hash"),
                                    .created_at = row.Int("created_at")},
                   .email_norm = row.Text("email_norm"),
                   .password_hash = row.Text("password_hash")};
}

core::Result<std::optional<PersonRow>> FindWhere(store::Transaction& tx, const char* where,
                                                 const std::string& value) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(std::string(kSelect) + where, {value}));
  if (!row) return std::optional<PersonRow>();
  return FromRow(*row);
}

store::Value Hash(const PersonRow& row) {
  return row.password_hash.empty() ? store::Value(store::kNull) : store::Value(row.password_hash);
}

}  // namespace

core::Result<std::optional<PersonRow>> PersonTable::Find(store::Transaction& tx,
                                                         const std::string& id) {
  return FindWhere(tx, "WHERE id = ?", id);
}

core::Result<std::optional<PersonRow>> PersonTable::FindByEmail(store::Transaction& tx,
                                                                const std::string& email_norm) {
  return FindWhere(tx, "WHERE email_norm = ?", email_norm);
}

core::Result<std::optional<std::string>> PersonTable::Email(store::Transaction& tx,
                                                            const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT email FROM persons WHERE id = ?", {id}));
  if (!row) return std::optional<std::string>();
  return row->Text("email");
}

core::Result<void> PersonTable::Insert(store::Transaction& tx, const PersonRow& row) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO persons (id, email, email_norm, password_hash, is_operator, created_at) "
              "VALUES (?, ?, ?, ?, ?, ?)",
              {row.person.id, row.person.email, row.email_norm, Hash(row),
               int64_t{row.person.is_operator ? 1 : 0}, row.person.created_at}));
  return {};
}

core::Result<bool> PersonTable::InsertUnlessEmailTaken(store::Transaction& tx,
                                                       const PersonRow& row) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n,
      tx.Exec("INSERT INTO persons (id, email, email_norm, password_hash, is_operator, created_at) "
              "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (email_norm) DO NOTHING",
              {row.person.id, row.person.email, row.email_norm, Hash(row),
               int64_t{row.person.is_operator ? 1 : 0}, row.person.created_at}));
  return n == 1;
}

core::Result<void> PersonTable::SetPasswordHash(store::Transaction& tx, const std::string& id,
                                                const std::string& password_hash) {
  GPUWERK_TRY(tx.Exec("UPDATE persons SET password_hash = ? WHERE id = ?", {password_hash, id}));
  return {};
}

}  // namespace gpuwerk::auth
