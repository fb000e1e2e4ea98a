#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::auth {

/// An email address as typed (trimmed) and its normalised form (ASCII-lowercased), which is
/// what accounts are matched and uniquely indexed on (R-1, case C27).
struct EmailAddress {
  std::string display;     ///< trimmed, as the person typed it
  std::string normalised;  ///< trimmed and lowercased
};

/// Validates and normalises an address: at most 254 bytes, one '@', a non-empty local part and a
/// domain with a dot, no whitespace or control characters. Errors: kInvalidArgument
/// "invalid_email".
core::Result<EmailAddress> ParseEmailAddress(std::string_view text);

}  // namespace gpuwerk::auth
