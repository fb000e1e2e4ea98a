#pragma once
// The relay-session list that `instances relay-sessions` and `admin relay-sessions` share.

#include <nlohmann/json.hpp>

#include "cli/internal/verb_support.h"

namespace gpuwerk::cli::internal {

/// Prints one page (`page_number`) of relay sessions, as GET …/relay-sessions answers it, as a
/// table with a page line, or under --json as the page itself. `with_person` adds the PERSON,
/// INSTANCE and RELAY columns (the operator's view).
void PrintRelaySessions(VerbContext& ctx, const nlohmann::json& page, int page_number,
                        bool with_person);

/// Checks a `--page` value. Errors: "invalid_page" below 1.
core::Result<void> CheckPage(int page_number);

}  // namespace gpuwerk::cli::internal
