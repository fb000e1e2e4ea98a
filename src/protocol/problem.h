#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace gpuwerk::protocol {

/// An error answer of the gpuwerk API: RFC 9457 problem details
/// (`Content-Type: application/problem+json`) with the API's stable machine-readable `code`
/// (DESIGN.md "The public API"). The server writes `type` "about:blank", `title` the status's
/// reason phrase, `status`, `detail` (a message for people) and `code`, then any extension members
/// (e.g. `instances` for key_in_use, `field` for invalid_field).
struct Problem {
  std::string type = "about:blank";
  std::string title;
  int status = 0;      ///< the HTTP status code, e.g. 409
  std::string detail;  ///< for people
  std::string code;    ///< stable, e.g. "key_in_use"
  /// Every other member, as sent (an object; empty when none).
  nlohmann::json extensions = nlohmann::json::object();

  bool operator==(const Problem&) const = default;
};

/// The members above, extensions last (an extension never overrides a standard member).
nlohmann::json ToJson(const Problem& problem);
/// Strict: `type`, `title`, `detail` and `code` must be strings and `status` an integer from 100
/// to 599. Errors: kInvalidArgument "invalid_field" naming the member.
core::Result<Problem> ProblemFromJson(const nlohmann::json& json);

}  // namespace gpuwerk::protocol
