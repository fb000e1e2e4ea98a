#pragma once

#include <gmock/gmock.h>

#include <expected>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"

namespace gpuwerk::testing {
namespace matchers_internal {

/// The `api_code` an error carries; nullopt when the value is not an error.
inline std::optional<std::string> ApiCodeOf(const core::Error& e) { return e.api_code; }

template <class T>
std::optional<std::string> ApiCodeOf(const std::expected<T, core::Error>& r) {
  if (r.has_value()) return std::nullopt;
  return r.error().api_code;
}

inline std::optional<std::string> ApiCodeOf(const std::unexpected<core::Error>& e) {
  return e.error().api_code;
}

/// Problem JSON (RFC 9457): its string `code`.
inline std::optional<std::string> ApiCodeOf(const nlohmann::json& problem) {
  if (!problem.is_object()) return std::nullopt;
  auto it = problem.find("code");
  if (it == problem.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

/// An HTTP answer of the test clients (HttpResult): the `code` of its problem JSON body.
template <class R>
requires requires(const R& r) {
  { r.Code() } -> std::convertible_to<std::string>;
}
std::optional<std::string> ApiCodeOf(const R& r) {
  std::string code = r.Code();
  if (code.empty()) return std::nullopt;
  return code;
}

}  // namespace matchers_internal

/// Matches an error with this outward `api_code` (the `code` of problem JSON): a core::Error, a
/// core::Result<T> (or any std::expected<T, core::Error>) that holds an error, problem JSON, or a
/// test HTTP answer (HttpResult) whose body is problem JSON. A value, a success or a body without
/// a code never matches.
///   EXPECT_THAT(service.Create(…), HasApiCode("name_taken"));
///   EXPECT_THAT(browser->Get("/api/v1/instances/x"), HasApiCode("not_found"));
MATCHER_P(HasApiCode, code,
          std::string(negation ? "is not an error with" : "is an error with") + " api_code \"" +
              std::string(code) + "\"") {
  const std::optional<std::string> got = matchers_internal::ApiCodeOf(arg);
  if (!got) {
    *result_listener << "which is not an error with an api_code";
    return false;
  }
  *result_listener << "whose api_code is \"" << *got << "\"";
  return *got == std::string(code);
}

}  // namespace gpuwerk::testing
