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

core::Result<std::string> StringField(const nlohmann::json& body, const char* field, size_t max_len,
                                      bool optional) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    if (optional) return std::string();
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                  std::string("The field '") + field + "' is required.")
                          .WithDetail("field", field));
  }
  if (!it->is_string()) {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                  std::string("The field '") + field + "' must be a string.")
                          .WithDetail("field", field));
  }
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > max_len) {
    return core::Fail(core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                                  std::string("The field '") + field + "' is too long (at most " +
                                      std::to_string(max_len) + " bytes).")
                          .WithDetail("field", field));
  }
  return s;
}

core::Result<int> PageParam(const Request& req) {
  auto it = req.query.find("page");
  if (it == req.query.end()) return 1;
  int page = 0;
  auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), page);
  if (ec != std::errc() || p != it->second.data() + it->second.size() || page < 1) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  return page;
}

}  // namespace gpuwerk::api
