#pragma once

#include <string_view>

#include "mail/mail.h"

namespace gpuwerk::auth {

/// The sign-in link mail. `link` opens a page whose button signs in (R-1, C26).
mail::Mail MagicLinkMail(std::string_view to, std::string_view link, int minutes_valid);
/// The password-reset link mail.
mail::Mail PasswordResetMail(std::string_view to, std::string_view link, int minutes_valid);
/// The link that proves a new account's address and sets its password (sign-up).
mail::Mail AddressProofMail(std::string_view to, std::string_view link, int hours_valid);
/// An operator's invitation: the link proves the address and sets the new account's password.
mail::Mail InviteMail(std::string_view to, std::string_view link, int days_valid);
/// Sent to an address that has a proven account when someone signs up with it again, instead of
/// a second account (so sign-up never reveals which addresses have accounts).
mail::Mail SignUpAttemptMail(std::string_view to, std::string_view sign_in_url);
/// Sent instead of a link when the address has no account (so the API never reveals which).
/// `invite_only`: sign-up is by invitation, so the note says to ask an operator instead.
mail::Mail NoAccountMail(std::string_view to, std::string_view signup_url, bool invite_only);

/// The notice that an API token was made for the account: its name, prefix and expiry ("" when
/// it never expires), and where to delete it if it was not the person.
mail::Mail ApiTokenCreatedMail(std::string_view to, std::string_view name, std::string_view prefix,
                               std::string_view expires, std::string_view source_address,
                               std::string_view account_url);
/// The notice that the account's password was changed (signed in, with the old password).
mail::Mail PasswordChangedMail(std::string_view to, std::string_view source_address,
                               std::string_view reset_url);

}  // namespace gpuwerk::auth
