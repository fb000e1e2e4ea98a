#include "billing/payment_hold_table.h"

namespace gpuwerk::billing {

core::Result<bool> PaymentHoldTable::Exists(store::Transaction& tx,
                                            const std::string& billing_account_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT 1 AS one FROM payment_holds WHERE billing_account_id = ? "
                            "LIMIT 1",
                            {billing_account_id}));
  return row.has_value();
}

core::Result<std::vector<PaymentHold>> PaymentHoldTable::Of(store::Transaction& tx,
                                                            const std::string& billing_account_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query("SELECT provider_ref, billing_account_id, reason, created_at FROM "
                          "payment_holds WHERE billing_account_id = ? ORDER BY created_at, "
                          "provider_ref",
                          {billing_account_id}));
  std::vector<PaymentHold> out;
  for (const auto& r : rows) {
    out.push_back({.provider_ref = r.Text("provider_ref"),
                   .billing_account_id = r.Text("billing_account_id"),
                   .reason = r.Text("reason"),
                   .created_at = r.Int("created_at")});
  }
  return out;
}

core::Result<void> PaymentHoldTable::Put(store::Transaction& tx, const PaymentHold& hold) {
  GPUWERK_TRY(tx.Exec("DELETE FROM payment_holds WHERE provider_ref = ?", {hold.provider_ref}));
  GPUWERK_TRY(
      tx.Exec("INSERT INTO payment_holds (provider_ref, billing_account_id, reason, created_at) "
              "VALUES (?, ?, ?, ?)",
              {hold.provider_ref, hold.billing_account_id, hold.reason, hold.created_at}));
  return {};
}

core::Result<bool> PaymentHoldTable::Delete(store::Transaction& tx,
                                            const std::string& provider_ref) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t gone, tx.Exec("DELETE FROM payment_holds WHERE provider_ref = ?", {provider_ref}));
  return gone > 0;
}

}  // namespace gpuwerk::billing
