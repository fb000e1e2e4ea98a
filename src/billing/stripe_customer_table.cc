#include "billing/stripe_customer_table.h"

namespace gpuwerk::billing {
namespace {

constexpr const char* kSelect =
    "SELECT customer_id, billing_account_id, created_at, deleted_at FROM stripe_customers ";

StripeCustomer FromRow(const store::Row& r) {
  return StripeCustomer{.customer_id = r.Text("customer_id"),
                        .billing_account_id = r.Text("billing_account_id"),
                        .created_at = r.Int("created_at"),
                        .deleted_at = r.Int("deleted_at")};
}

}  // namespace

core::Result<std::optional<StripeCustomer>> StripeCustomerTable::FindLive(
    store::Transaction& tx, const std::string& billing_account_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne(std::string(kSelect) + "WHERE billing_account_id = ? AND deleted_at IS NULL",
                  {billing_account_id}));
  if (!row) return std::optional<StripeCustomer>();
  return std::optional<StripeCustomer>(FromRow(*row));
}

core::Result<std::optional<StripeCustomer>> StripeCustomerTable::Find(
    store::Transaction& tx, const std::string& customer_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne(std::string(kSelect) + "WHERE customer_id = ?", {customer_id}));
  if (!row) return std::optional<StripeCustomer>();
  return std::optional<StripeCustomer>(FromRow(*row));
}

core::Result<void> StripeCustomerTable::Insert(store::Transaction& tx, const StripeCustomer& c) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO stripe_customers (customer_id, billing_account_id, created_at) VALUES (?, ?, ?)",
      {c.customer_id, c.billing_account_id, c.created_at}));
  return {};
}

core::Result<bool> StripeCustomerTable::MarkDeleted(store::Transaction& tx,
                                                    const std::string& customer_id, int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t changed,
      tx.Exec("UPDATE stripe_customers SET deleted_at = ? WHERE customer_id = ? AND "
              "deleted_at IS NULL",
              {now, customer_id}));
  return changed > 0;
}

}  // namespace gpuwerk::billing
