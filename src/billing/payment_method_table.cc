#include "billing/payment_method_table.h"

namespace gpuwerk::billing {
namespace {

constexpr const char* kColumns =
    "billing_account_id, provider, brand, last4, exp_month, exp_year, provider_ref, created_at, "
    "updated_at";

PaymentMethod FromRow(const store::Row& r) {
  return PaymentMethod{.billing_account_id = r.Text("billing_account_id"),
                       .provider = r.Text("provider"),
                       .brand = r.Text("brand"),
                       .last4 = r.Text("last4"),
                       .exp_month = r.Int("exp_month"),
                       .exp_year = r.Int("exp_year"),
                       .provider_ref = r.Text("provider_ref"),
                       .created_at = r.Int("created_at"),
                       .updated_at = r.Int("updated_at")};
}

}  // namespace

core::Result<std::optional<PaymentMethod>> PaymentMethodTable::Find(
    store::Transaction& tx, const std::string& billing_account_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto row,
                           tx.QueryOne(std::string("SELECT ") + kColumns +
                                           " FROM payment_methods WHERE billing_account_id = ?",
                                       {billing_account_id}));
  if (!row) return std::optional<PaymentMethod>();
  return std::optional<PaymentMethod>(FromRow(*row));
}

core::Result<std::optional<PaymentMethod>> PaymentMethodTable::FindByProviderRef(
    store::Transaction& tx, const std::string& provider, const std::string& provider_ref) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne(std::string("SELECT ") + kColumns +
                                " FROM payment_methods WHERE provider = ? AND provider_ref = ?",
                            {provider, provider_ref}));
  if (!row) return std::optional<PaymentMethod>();
  return std::optional<PaymentMethod>(FromRow(*row));
}

core::Result<std::set<std::string>> PaymentMethodTable::AccountsOfProvider(
    store::Transaction& tx, const std::string& provider) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows,
      tx.Query("SELECT billing_account_id FROM payment_methods WHERE provider = ?", {provider}));
  std::set<std::string> out;
  for (const auto& r : rows) out.insert(r.Text("billing_account_id"));
  return out;
}

core::Result<bool> PaymentMethodTable::Exists(store::Transaction& tx,
                                              const std::string& billing_account_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT 1 AS one FROM payment_methods WHERE billing_account_id = ?",
                            {billing_account_id}));
  return row.has_value();
}

core::Result<void> PaymentMethodTable::Upsert(store::Transaction& tx, const PaymentMethod& m) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t changed,
      tx.Exec("UPDATE payment_methods SET provider = ?, brand = ?, last4 = ?, exp_month = ?, "
              "exp_year = ?, provider_ref = ?, updated_at = ? WHERE billing_account_id = ?",
              {m.provider, m.brand, m.last4, m.exp_month, m.exp_year, m.provider_ref, m.updated_at,
               m.billing_account_id}));
  if (changed > 0) return {};
  GPUWERK_TRY(tx.Exec(std::string("INSERT INTO payment_methods (") + kColumns +
                          ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      {m.billing_account_id, m.provider, m.brand, m.last4, m.exp_month, m.exp_year,
                       m.provider_ref, m.created_at, m.updated_at}));
  return {};
}

core::Result<bool> PaymentMethodTable::Delete(store::Transaction& tx,
                                              const std::string& billing_account_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t gone,
      tx.Exec("DELETE FROM payment_methods WHERE billing_account_id = ?", {billing_account_id}));
  return gone > 0;
}

}  // namespace gpuwerk::billing
