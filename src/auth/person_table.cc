#include "auth/person_table.h"

#include <algorithm>
#include <string>

namespace gpuwerk::auth {
namespace {

constexpr char kSelect[] =
    "SELECT id, email, email_norm, is_operator, password_hash, created_at, email_proven_at FROM "
    "persons ";

PersonRow FromRow(const store::Row& row) {
  return PersonRow{
      .person = Person{.id = row.Text("id"),
                       .email = row.Text("email"),
                       .is_operator = row.Int("is_operator") != 0,
                       .has_password = !row.IsNull("password_hash"),
                       .created_at = row.Int("created_at"),
                       .email_proven_at = row.IsNull("email_proven_at")
                                              ? std::nullopt
                                              : std::optional<int64_t>(row.Int("email_proven_at"))},
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

store::Value ProvenAt(const PersonRow& row) {
  return row.person.email_proven_at ? store::Value(*row.person.email_proven_at)
                                    : store::Value(store::kNull);
}

/// Inserts `row`; `suffix` follows the VALUES (e.g. an ON CONFLICT clause). Rows changed.
core::Result<int64_t> InsertRow(store::Transaction& tx, const PersonRow& row,
                                std::string_view suffix) {
  return tx.Exec(
      "INSERT INTO persons (id, email, email_norm, password_hash, is_operator, created_at, "
      "email_proven_at) VALUES (?, ?, ?, ?, ?, ?, ?)" +
          std::string(suffix),
      {row.person.id, row.person.email, row.email_norm, Hash(row),
       int64_t{row.person.is_operator ? 1 : 0}, row.person.created_at, ProvenAt(row)});
}

core::Result<std::vector<PersonRow>> Many(core::Result<std::vector<store::Row>> rows) {
  if (!rows) return std::unexpected(rows.error());
  std::vector<PersonRow> out;
  out.reserve(rows->size());
  for (const auto& r : *rows) out.push_back(FromRow(r));
  return out;
}

}  // namespace

core::Result<std::vector<PersonRow>> PersonTable::PageAll(store::Transaction& tx,
                                                          const core::KeysetQuery& query,
                                                          int64_t limit) {
  const std::string lim = " LIMIT " + std::to_string(std::max<int64_t>(limit, 0));
  if (query.before) {
    return Many(tx.Query(std::string(kSelect) +
                             "WHERE created_at < ? OR (created_at = ? AND id < ?) "
                             "ORDER BY created_at DESC, id DESC" +
                             lim,
                         {query.before->at, query.before->at, query.before->id}));
  }
  if (query.after) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows, Many(tx.Query(std::string(kSelect) +
                                     "WHERE created_at > ? OR (created_at = ? AND id > ?) "
                                     "ORDER BY created_at ASC, id ASC" +
                                     lim,
                                 {query.after->at, query.after->at, query.after->id})));
    std::reverse(rows.begin(), rows.end());
    return rows;
  }
  return Many(tx.Query(std::string(kSelect) + "ORDER BY created_at DESC, id DESC" + lim, {}));
}

core::Result<int64_t> PersonTable::CountAll(store::Transaction& tx,
                                            const std::optional<core::KeysetKey>& newer_than) {
  std::optional<store::Row> row;
  if (newer_than) {
    GPUWERK_ASSIGN_OR_RETURN(
        row, tx.QueryOne("SELECT COUNT(*) AS n FROM persons WHERE created_at > ? OR "
                         "(created_at = ? AND id > ?)",
                         {newer_than->at, newer_than->at, newer_than->id}));
  } else {
    GPUWERK_ASSIGN_OR_RETURN(row, tx.QueryOne("SELECT COUNT(*) AS n FROM persons", {}));
  }
  return row ? row->Int("n") : 0;
}

core::Result<int64_t> PersonTable::CountOperators(store::Transaction& tx) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM persons WHERE is_operator = 1", {}));
  return row ? row->Int("n") : 0;
}

core::Result<bool> PersonTable::SetOperator(store::Transaction& tx, const std::string& id,
                                            bool is_operator) {
  if (is_operator) {
    GPUWERK_TRY(tx.Exec("UPDATE persons SET is_operator = 1 WHERE id = ?", {id}));
    return true;
  }
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           tx.QueryOne("SELECT is_operator FROM persons WHERE id = ?", {id}));
  if (!row || row->Int("is_operator") == 0) return true;
  GPUWERK_ASSIGN_OR_RETURN(int64_t n,
                           tx.Exec("UPDATE persons SET is_operator = 0 WHERE id = ? AND "
                                   "(SELECT COUNT(*) FROM persons WHERE is_operator = 1) > 1",
                                   {id}));
  return n == 1;
}

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
  GPUWERK_TRY(InsertRow(tx, row, ""));
  return {};
}

core::Result<bool> PersonTable::InsertUnlessEmailTaken(store::Transaction& tx,
                                                       const PersonRow& row) {
  GPUWERK_ASSIGN_OR_RETURN(int64_t n, InsertRow(tx, row, " ON CONFLICT (email_norm) DO NOTHING"));
  return n == 1;
}

core::Result<void> PersonTable::SetPasswordHash(store::Transaction& tx, const std::string& id,
                                                const std::string& password_hash) {
  GPUWERK_TRY(tx.Exec(
      "UPDATE persons SET password_hash = ? WHERE id = ?",
      {password_hash.empty() ? store::Value(store::kNull) : store::Value(password_hash), id}));
  return {};
}

core::Result<bool> PersonTable::MarkEmailProven(store::Transaction& tx, const std::string& id,
                                                int64_t at) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n,
      tx.Exec("UPDATE persons SET email_proven_at = ? WHERE id = ? AND email_proven_at IS NULL",
              {at, id}));
  return n == 1;
}

}  // namespace gpuwerk::auth
