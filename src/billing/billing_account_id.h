#pragma once

// Who pays: a billing account is a person billed alone ("solo") or a team. Tables
// that hold money (billing_sessions, invoices) are keyed by a `billing_account_id` text.

#include <string>

namespace gpuwerk::billing {

/// The billing account id of person `person_id` billed alone: the person id itself (`per_…`,
/// stable for the person's life, never reused). A team's account is its team id (teams/).
inline std::string SoloBillingAccountId(const std::string& person_id) { return person_id; }

}  // namespace gpuwerk::billing
