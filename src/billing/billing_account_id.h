#pragma once

// Who pays: a billing account is a person billed alone ("solo") or a team. Tables
// that hold money (billing_sessions, invoices) are keyed by a `billing_account_id` text.

#include <string>

namespace gpuwerk::billing {

/// The billing account id of person `person_id` billed alone: "solo_" + the person id (stable
/// for the person's life, never reused; the same as the payment methods' solo account id). A
/// team's account is its team id (teams/).
inline std::string SoloBillingAccountId(const std::string& person_id) {
  return "solo_" + person_id;
}

}  // namespace gpuwerk::billing
