#include "auth/link_token_table.h"

namespace gpuwerk::auth {

std::string_view LinkPurposeName(LinkPurpose purpose) {
  switch (purpose) {
    case LinkPurpose::kMagicLink:
      return "magic_link";
    case LinkPurpose::kPasswordReset:
      return "password_reset";
    case LinkPurpose::kAddressProof:
      return "address_proof";
    case LinkPurpose::kInvite:
      return "invite";
  }
  return "magic_link";
}

core::Result<void> LinkTokenTable::Insert(store::Transaction& tx, const LinkTokenRow& row) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO link_tokens (token_hash, person_id, purpose, created_at, expires_at) "
              "VALUES (?, ?, ?, ?, ?)",
              {row.token_hash, row.person_id, std::string(LinkPurposeName(row.purpose)),
               row.created_at, row.expires_at}));
  return {};
}

core::Result<std::optional<std::string>> LinkTokenTable::Consume(store::Transaction& tx,
                                                                 const std::string& token_hash,
                                                                 LinkPurpose purpose, int64_t now) {
  // Single use: the UPDATE succeeds for exactly one consumer.
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t changed,
      tx.Exec("UPDATE link_tokens SET used_at = ? WHERE token_hash = ? AND purpose = ? AND "
              "used_at IS NULL AND expires_at > ?",
              {now, token_hash, std::string(LinkPurposeName(purpose)), now}));
  if (changed != 1) return std::optional<std::string>();
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT person_id FROM link_tokens WHERE token_hash = ?", {token_hash}));
  if (!row) return std::optional<std::string>();
  return row->Text("person_id");
}

core::Result<bool> LinkTokenTable::IsUsable(store::Transaction& tx, const std::string& token_hash,
                                            LinkPurpose purpose, int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT 1 FROM link_tokens WHERE token_hash = ? AND purpose = ? AND "
                            "used_at IS NULL AND expires_at > ?",
                            {token_hash, std::string(LinkPurposeName(purpose)), now}));
  return row.has_value();
}

core::Result<int64_t> LinkTokenTable::VoidUnused(store::Transaction& tx,
                                                 const std::string& person_id,
                                                 std::optional<LinkPurpose> purpose) {
  if (!purpose) {
    return tx.Exec("DELETE FROM link_tokens WHERE person_id = ? AND used_at IS NULL", {person_id});
  }
  return tx.Exec("DELETE FROM link_tokens WHERE person_id = ? AND purpose = ? AND used_at IS NULL",
                 {person_id, std::string(LinkPurposeName(*purpose))});
}

}  // namespace gpuwerk::auth
