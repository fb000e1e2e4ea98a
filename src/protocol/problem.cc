#include "protocol/problem.h"

#include "protocol/internal/json_fields.h"

namespace gpuwerk::protocol {

nlohmann::json ToJson(const Problem& p) {
  nlohmann::json j = {{"type", p.type},
                      {"title", p.title},
                      {"status", p.status},
                      {"detail", p.detail},
                      {"code", p.code}};
  if (p.extensions.is_object()) {
    for (const auto& [key, value] : p.extensions.items()) {
      if (!j.contains(key)) j[key] = value;
    }
  }
  return j;
}

core::Result<Problem> ProblemFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(internal::FieldReader r, internal::FieldReader::Open(json, ""));
  Problem p;
  GPUWERK_ASSIGN_OR_RETURN(p.type, r.String("type"));
  GPUWERK_ASSIGN_OR_RETURN(p.title, r.String("title"));
  GPUWERK_ASSIGN_OR_RETURN(int64_t status, r.IntIn("status", 100, 599));
  p.status = static_cast<int>(status);
  GPUWERK_ASSIGN_OR_RETURN(p.detail, r.String("detail"));
  GPUWERK_ASSIGN_OR_RETURN(p.code, r.String("code"));
  for (const auto& [key, value] : json.items()) {
    if (key != "type" && key != "title" && key != "status" && key != "detail" && key != "code") {
      p.extensions[key] = value;
    }
  }
  return p;
}

}  // namespace gpuwerk::protocol
