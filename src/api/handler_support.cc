#include "api/handler_support.h"

#include <charconv>

namespace gpuwerk::api {

Response ErrorResponse(const core::Error& error) {
  Response r = Problem(error);
  if (error.details.contains("retry_after_seconds")) {
    r.headers.emplace_back("Retry-After", error.details["retry_after_seconds"].dump());
  }
  return r;
}

nlohmann::json PersonJson(const auth::Person& p) {
  return {{"id", p.id},
          {"email", p.email},
          {"is_operator", p.is_operator},
          {"has_password", p.has_password},
          {"created_at", core::FormatRfc3339(p.created_at)}};
}

core::Result<int> PageParam(const Request& req) {
  auto page = req.QueryInt("page", 1);
  if (!page || *page < 1 || *page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  return static_cast<int>(*page);
}

}  // namespace gpuwerk::api
