#pragma once

// Payment methods for tests: launches and restarts need one on the person's billing
// account, so fixtures that sign people up record the operator's manual card for them, through
// the operator's route (docs/billing.md "Manual provider").
#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/http_client.h"

namespace gpuwerk::testing {

/// Whether a fixture's sign-up records a payment method for the new person.
enum class Card {
  kRecorded,  ///< the operator records TestCardJson(): the person can launch at once
  kNone,      ///< none: launches and restarts answer 402 payment_method_required
};

/// The card tests record: {"brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2099}.
inline nlohmann::json TestCardJson() {
  return {{"brand", "visa"}, {"last4", "4242"}, {"exp_month", 12}, {"exp_year", 2099}};
}

/// The operator route of a person's card, the address percent-escaped.
inline std::string AdminCardPath(const std::string& email) {
  std::string escaped;
  for (unsigned char c : email) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '@') {
      escaped += static_cast<char>(c);
    } else {
      static const char* kHex = "0123456789ABCDEF";
      escaped += '%';
      escaped += kHex[c >> 4];
      escaped += kHex[c & 15];
    }
  }
  return "/api/v1/admin/billing/" + escaped + "/card";
}

/// The operator `op` (a signed-in operator's client) records `card` for `email`
/// (PUT /api/v1/admin/billing/{email}/card; expects 200).
inline ::testing::AssertionResult RecordCard(HttpClient& op, const std::string& email,
                                             const nlohmann::json& card = TestCardJson()) {
  auto r = op.Send("PUT", AdminCardPath(email), card.dump(), {"Content-Type: application/json"});
  if (r.status != 200) {
    return ::testing::AssertionFailure()
           << "recording a card for " << email << ": " << r.status << " " << r.body;
  }
  return ::testing::AssertionSuccess();
}

/// The operator `op` clears `email`'s card (DELETE /api/v1/admin/billing/{email}/card; expects
/// 200).
inline ::testing::AssertionResult ClearCard(HttpClient& op, const std::string& email) {
  auto r = op.Delete(AdminCardPath(email));
  if (r.status != 200) {
    return ::testing::AssertionFailure()
           << "clearing the card of " << email << ": " << r.status << " " << r.body;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace gpuwerk::testing
