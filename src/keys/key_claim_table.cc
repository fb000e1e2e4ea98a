#include "keys/key_claim_table.h"

namespace gpuwerk::keys {

core::Result<void> KeyClaimTable::Insert(store::Transaction& tx, const KeyClaimChallenge& c) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO key_claim_challenges (id, person_id, fingerprint, challenge, created_at, "
      "expires_at) VALUES (?, ?, ?, ?, ?, ?)",
      {c.id, c.person_id, c.fingerprint, c.challenge, c.created_at, c.expires_at}));
  return {};
}

core::Result<std::optional<KeyClaimChallenge>> KeyClaimTable::FindUsable(
    store::Transaction& tx, const std::string& person_id, const std::string& challenge,
    int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT id, person_id, fingerprint, challenge, created_at, expires_at "
                            "FROM key_claim_challenges WHERE person_id = ? AND challenge = ? AND "
                            "used_at IS NULL AND expires_at > ?",
                            {person_id, challenge, now}));
  if (!row) return std::optional<KeyClaimChallenge>();
  return KeyClaimChallenge{.id = row->Text("id"),
                           .person_id = row->Text("person_id"),
                           .fingerprint = row->Text("fingerprint"),
                           .challenge = row->Text("challenge"),
                           .created_at = row->Int("created_at"),
                           .expires_at = row->Int("expires_at")};
}

core::Result<bool> KeyClaimTable::Use(store::Transaction& tx, const std::string& id, int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t changed,
      tx.Exec("UPDATE key_claim_challenges SET used_at = ? WHERE id = ? AND used_at IS NULL",
              {now, id}));
  return changed == 1;
}

core::Result<int64_t> KeyClaimTable::CountUsable(store::Transaction& tx,
                                                 const std::string& person_id, int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) FROM key_claim_challenges WHERE person_id = ? AND "
                            "used_at IS NULL AND expires_at > ?",
                            {person_id, now}));
  return row->Int(0);
}

core::Result<void> KeyClaimTable::DeleteSpent(store::Transaction& tx, const std::string& person_id,
                                              int64_t now) {
  GPUWERK_TRY(
      tx.Exec("DELETE FROM key_claim_challenges WHERE person_id = ? AND (used_at IS NOT NULL OR "
              "expires_at <= ?)",
              {person_id, now}));
  return {};
}

}  // namespace gpuwerk::keys
