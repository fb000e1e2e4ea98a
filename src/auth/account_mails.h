#pragma once

#include <string_view>

#include "mail/mail.h"

namespace gpuwerk::auth {

/// The sign-in link mail. `link` opens a page whose button signs in (R-1, C26).
mail::Mail MagicLinkMail(std::string_view to, std::string_view link, int minutes_valid);
/// The password-reset link mail.
mail::Mail PasswordResetMail(std::string_view to, std::string_view link, int minutes_valid);
/// Sent instead of a link when the address has no account (so the API never reveals which).
mail::Mail NoAccountMail(std::string_view to, std::string_view signup_url);

}  // namespace gpuwerk::auth
