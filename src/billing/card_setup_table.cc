#include "billing/card_setup_table.h"

namespace gpuwerk::billing {

core::Result<void> CardSetupTable::Insert(store::Transaction& tx, const CardSetupRecord& setup) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO card_setups (provider_ref, billing_account_id, person_id, state, "
              "created_at) VALUES (?, ?, ?, 'open', ?)",
              {setup.provider_ref, setup.billing_account_id, setup.person_id, setup.created_at}));
  return {};
}

core::Result<std::optional<CardSetupRecord>> CardSetupTable::Find(store::Transaction& tx,
                                                                  const std::string& provider_ref) {
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           tx.QueryOne("SELECT provider_ref, billing_account_id, person_id, state, "
                                       "created_at FROM card_setups WHERE provider_ref = ?",
                                       {provider_ref}));
  if (!row) return std::optional<CardSetupRecord>();
  return CardSetupRecord{.provider_ref = row->Text("provider_ref"),
                         .billing_account_id = row->Text("billing_account_id"),
                         .person_id = row->Text("person_id"),
                         .state = row->Text("state"),
                         .created_at = row->Int("created_at")};
}

core::Result<bool> CardSetupTable::Close(store::Transaction& tx, const std::string& provider_ref,
                                         const std::string& state) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("UPDATE card_setups SET state = ? WHERE provider_ref = ? AND state = "
                         "'open'",
                         {state, provider_ref}));
  return n > 0;
}

core::Result<int64_t> CardSetupTable::VoidOpen(store::Transaction& tx,
                                               const std::string& billing_account_id) {
  return tx.Exec(
      "UPDATE card_setups SET state = 'void' WHERE billing_account_id = ? AND state = 'open'",
      {billing_account_id});
}

}  // namespace gpuwerk::billing
