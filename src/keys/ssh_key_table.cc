#include "keys/ssh_key_table.h"

namespace gpuwerk::keys {
namespace {

// A macro so that the hot list statement below is one literal (no string built per call).
#define GPUWERK_SSH_KEY_COLUMNS \
  "id, person_id, name, key_type, bits, public_key, fingerprint, created_at, proven_at"
constexpr const char* kColumns = GPUWERK_SSH_KEY_COLUMNS;
/// kColumns' positions: every statement here selects kColumns first, so a row is read by index
/// (a page of keys reads ten rows of nine columns; a lookup by name compares column names).
enum Column : size_t {
  kId,
  kPersonId,
  kName,
  kKeyType,
  kBits,
  kPublicKey,
  kFingerprint,
  kCreatedAt,
  kProvenAt,
};

SshKey KeyFromRow(const store::Row& r) {
  return SshKey{.id = r.Text(kId),
                .person_id = r.Text(kPersonId),
                .name = r.Text(kName),
                .type = r.Text(kKeyType),
                .bits = static_cast<int>(r.Int(kBits)),
                .public_key = r.Text(kPublicKey),
                .fingerprint = r.Text(kFingerprint),
                .created_at = r.Int(kCreatedAt),
                .proven_at = r.OptInt(kProvenAt)};
}

core::Result<std::optional<SshKey>> One(core::Result<std::optional<store::Row>> row) {
  if (!row) return std::unexpected(row.error());
  if (!*row) return std::optional<SshKey>();
  return std::optional<SshKey>(KeyFromRow(**row));
}

}  // namespace

core::Result<std::optional<SshKey>> SshKeyTable::Find(store::Transaction& tx,
                                                      const std::string& id) {
  return One(tx.QueryOne(std::string("SELECT ") + kColumns + " FROM ssh_keys WHERE id = ?", {id}));
}

core::Result<std::optional<SshKey>> SshKeyTable::FindOwned(store::Transaction& tx,
                                                           const std::string& person_id,
                                                           const std::string& id) {
  return One(tx.QueryOne(
      std::string("SELECT ") + kColumns + " FROM ssh_keys WHERE id = ? AND person_id = ?",
      {id, person_id}));
}

core::Result<std::optional<SshKey>> SshKeyTable::FindClash(store::Transaction& tx,
                                                           const std::string& person_id,
                                                           const std::string& name,
                                                           const std::string& fingerprint) {
  return One(tx.QueryOne(std::string("SELECT ") + kColumns +
                             " FROM ssh_keys WHERE person_id = ? AND (name = ? OR fingerprint = ?)",
                         {person_id, name, fingerprint}));
}

core::Result<std::optional<SshKey>> SshKeyTable::FindByFingerprint(store::Transaction& tx,
                                                                   const std::string& fingerprint) {
  return One(tx.QueryOne(std::string("SELECT ") + kColumns + " FROM ssh_keys WHERE fingerprint = ?",
                         {fingerprint}));
}

core::Result<void> SshKeyTable::Insert(store::Transaction& tx, const SshKey& key) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO ssh_keys (id, person_id, name, key_type, bits, public_key, fingerprint, "
              "created_at, proven_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
              {key.id, key.person_id, key.name, key.type, static_cast<int64_t>(key.bits),
               key.public_key, key.fingerprint, key.created_at, store::Nullable(key.proven_at)}));
  return {};
}

core::Result<void> SshKeyTable::MarkProven(store::Transaction& tx, const std::string& id,
                                           int64_t now) {
  GPUWERK_TRY(
      tx.Exec("UPDATE ssh_keys SET proven_at = ? WHERE id = ? AND proven_at IS NULL", {now, id}));
  return {};
}

core::Result<std::pair<std::vector<SshKey>, int64_t>> SshKeyTable::ListPage(
    store::Transaction& tx, const std::string& person_id, int64_t limit, int64_t offset) {
  // One statement: the page and, beside each row, the total (an uncorrelated subquery, run
  // once). Only a page past the end needs a separate count.
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query("SELECT " GPUWERK_SSH_KEY_COLUMNS
               ", (SELECT COUNT(*) FROM ssh_keys WHERE person_id = ?) AS total FROM ssh_keys "
               "WHERE person_id = ? ORDER BY created_at, id LIMIT ? OFFSET ?",
               {person_id, person_id, limit, offset}));
  std::pair<std::vector<SshKey>, int64_t> out;
  if (!rows.empty()) {
    out.second = rows.front().Int("total");
  } else {
    GPUWERK_ASSIGN_OR_RETURN(
        auto count,
        tx.QueryOne("SELECT COUNT(*) AS n FROM ssh_keys WHERE person_id = ?", {person_id}));
    out.second = count->Int("n");
  }
  out.first.reserve(rows.size());
  for (const auto& r : rows) out.first.push_back(KeyFromRow(r));
  return out;
}

core::Result<bool> SshKeyTable::Delete(store::Transaction& tx, const std::string& person_id,
                                       const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("DELETE FROM ssh_keys WHERE id = ? AND person_id = ?", {id, person_id}));
  return n > 0;
}

core::Result<int64_t> SshKeyTable::DeleteAllOf(store::Transaction& tx,
                                               const std::string& person_id) {
  return tx.Exec("DELETE FROM ssh_keys WHERE person_id = ?", {person_id});
}

}  // namespace gpuwerk::keys
