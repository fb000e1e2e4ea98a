#include "billing/billing_account.h"

#include "auth/person_table.h"

namespace gpuwerk::billing {

std::string_view ToString(AccountKind kind) { return kind == AccountKind::kTeam ? "team" : "solo"; }

std::string SoloAccountId(std::string_view person_id) { return "solo_" + std::string(person_id); }

core::Result<BillingAccount> SoloAccountOf(store::Transaction& tx, const std::string& person_id) {
  GPUWERK_ASSIGN_OR_RETURN(auto email, auth::PersonTable::Email(tx, person_id));
  if (!email) return core::NotFound("Person");
  return BillingAccount{.id = SoloBillingAccountId(person_id),
                        .kind = AccountKind::kSolo,
                        .name = std::move(*email),
                        .may_manage = true};
}

}  // namespace gpuwerk::billing
