#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace gpuwerk::keys {

/// The longest SSH key name, in characters (all names are ASCII, so also in bytes).
inline constexpr size_t kMaxKeyNameLength = 64;

/// Checks a person's name for one of their SSH keys and returns it normalised: surrounding
/// whitespace removed. A valid name has 1 to kMaxKeyNameLength characters, each an ASCII letter,
/// digit, '.', '-', '_' or a space (spaces only inside, after trimming).
/// Uniqueness per account is the store's business, not checked here.
/// Errors: core::ErrorCode::kInvalidArgument with api_code "invalid_name"; the message never
/// contains the input. Thread-safe.
core::Result<std::string> ValidateKeyName(std::string_view name);

}  // namespace gpuwerk::keys
