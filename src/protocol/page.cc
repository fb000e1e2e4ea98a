#include "protocol/page.h"

#include <limits>

#include "protocol/internal/json_fields.h"

namespace gpuwerk::protocol {

nlohmann::json ToJson(const Page& p) {
  nlohmann::json j = {{"items", p.items}, {"page", p.page}, {"pages", p.pages}, {"total", p.total}};
  if (!p.next.empty()) j["next"] = p.next;
  if (!p.prev.empty()) j["prev"] = p.prev;
  return j;
}

core::Result<Page> PageFromJson(const nlohmann::json& json) {
  GPUWERK_ASSIGN_OR_RETURN(internal::FieldReader r, internal::FieldReader::Open(json, ""));
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Page p;
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* items, r.Array("items"));
  p.items = *items;
  GPUWERK_ASSIGN_OR_RETURN(p.page, r.IntIn("page", 0, kMax));
  GPUWERK_ASSIGN_OR_RETURN(p.pages, r.IntIn("pages", 0, kMax));
  GPUWERK_ASSIGN_OR_RETURN(p.total, r.IntIn("total", 0, kMax));
  if (r.Has("next")) {
    GPUWERK_ASSIGN_OR_RETURN(p.next, r.String("next", 200));
  }
  if (r.Has("prev")) {
    GPUWERK_ASSIGN_OR_RETURN(p.prev, r.String("prev", 200));
  }
  return p;
}

}  // namespace gpuwerk::protocol
