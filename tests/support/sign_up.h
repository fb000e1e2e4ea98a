#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/eventually.h"
#include "tests/support/http_client.h"
#include "tests/support/mail_reader.h"

namespace gpuwerk::testing {

/// The path of the page an address-proof link opens (docs/accounts.md "Address proof").
inline constexpr char kAddressProofPath[] = "/auth/prove-address";

/// The tokens of the address-proof links mailed to `to` under `maildir`, oldest first.
inline std::vector<std::string> AddressProofTokens(const std::filesystem::path& maildir,
                                                   const std::string& to) {
  std::vector<std::string> tokens;
  for (const auto& m : MailsTo(maildir, to)) {
    std::string token = m.TokenFromLink(kAddressProofPath);
    if (!token.empty()) tokens.push_back(std::move(token));
  }
  return tokens;
}

/// Signs `email` up through `client` (POST /api/v1/auth/signup, 202) and proves the address with
/// the link mailed to the Maildir under `maildir`, setting `password`: afterwards `client` holds
/// the new sign-in session and the account may launch, make tokens and add keys. The used mail
/// is deleted, as a person would, so tests that count a person's mails count only the later
/// ones. `nudge` (may be empty) is called while waiting for the mail, e.g. to make an in-process
/// outbox deliver now. Waits up to `limit` for the mail.
inline ::testing::AssertionResult SignUpAndProve(
    HttpClient& client, const std::filesystem::path& maildir, const std::string& email,
    const std::string& password, const std::function<void()>& nudge = {},
    std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const size_t before = AddressProofTokens(maildir, email).size();
  auto r = client.PostJson("/api/v1/auth/signup", {{"email", email}, {"password", password}});
  if (r.status != 202) {
    return ::testing::AssertionFailure()
           << "sign-up of " << email << ": " << r.status << " " << r.body;
  }
  std::string token;
  std::filesystem::path file;
  const bool mailed = Eventually(
      [&] {
        if (nudge) nudge();
        size_t seen = 0;
        for (const auto& m : MailsTo(maildir, email)) {
          std::string t = m.TokenFromLink(kAddressProofPath);
          if (t.empty()) continue;
          if (++seen > before) {
            token = std::move(t);
            file = m.file;
          }
        }
        return seen > before;
      },
      limit, std::chrono::milliseconds(50));
  if (!mailed) {
    return ::testing::AssertionFailure() << "no address-proof link came for " << email;
  }
  std::error_code ignored;
  std::filesystem::remove(file, ignored);
  auto proven = client.PostJson("/api/v1/auth/prove-address/consume",
                                {{"token", token}, {"password", password}});
  if (proven.status != 200) {
    return ::testing::AssertionFailure()
           << "proving " << email << ": " << proven.status << " " << proven.body;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace gpuwerk::testing
