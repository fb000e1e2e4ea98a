#include "protocol/internal/json_fields.h"

#include <algorithm>
#include <limits>

namespace gpuwerk::protocol::internal {

core::Error FieldError(std::string_view path, std::string_view what) {
  return core::Error(core::ErrorCode::kInvalidArgument, "invalid_field",
                     "field '" + std::string(path) + "' " + std::string(what))
      .WithDetail("field", std::string(path));
}

core::Result<FieldReader> FieldReader::Open(const nlohmann::json& value, std::string path) {
  if (!value.is_object()) {
    return core::Fail(FieldError(path.empty() ? "body" : path, "must be an object"));
  }
  return FieldReader(value, path.empty() ? std::string() : path + ".");
}

std::string FieldReader::Path(std::string_view name) const { return prefix_ + std::string(name); }

std::string FieldReader::Path(std::string_view name, size_t index) const {
  return Path(name) + "[" + std::to_string(index) + "]";
}

bool FieldReader::Has(std::string_view name) const {
  auto it = object_->find(name);
  return it != object_->end() && !it->is_null();
}

core::Result<void> FieldReader::Only(std::initializer_list<std::string_view> names) const {
  for (const auto& [key, value] : object_->items()) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      return core::Fail(FieldError(Path(key), "is not a member of this message"));
    }
  }
  return {};
}

core::Result<const nlohmann::json*> FieldReader::Present(std::string_view name) const {
  auto it = object_->find(name);
  if (it == object_->end() || it->is_null()) {
    return core::Fail(FieldError(Path(name), "is required"));
  }
  return &*it;
}

core::Result<std::string> FieldReader::String(std::string_view name) const {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* v, Present(name));
  if (!v->is_string()) return core::Fail(FieldError(Path(name), "must be a string"));
  return v->get<std::string>();
}

core::Result<std::string> FieldReader::String(std::string_view name, size_t max_len,
                                              size_t min_len) const {
  GPUWERK_ASSIGN_OR_RETURN(std::string v, String(name));
  // The JSON parser has checked the UTF-8: count the bytes that start a code point.
  const size_t n = static_cast<size_t>(std::count_if(
      v.begin(), v.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
  if (n < min_len) {
    return core::Fail(FieldError(
        Path(name), min_len == 1 ? "must not be empty"
                                 : "must be at least " + std::to_string(min_len) + " characters"));
  }
  if (n > max_len) {
    return core::Fail(
        FieldError(Path(name), "must be at most " + std::to_string(max_len) + " characters"));
  }
  return v;
}

core::Result<int64_t> FieldReader::Int(std::string_view name) const {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* v, Present(name));
  if (v->is_number_unsigned() &&
      v->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(v->get<uint64_t>());
  }
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<int64_t>();
  return core::Fail(FieldError(Path(name), "must be an integer"));
}

core::Result<int64_t> FieldReader::IntIn(std::string_view name, int64_t min, int64_t max) const {
  GPUWERK_ASSIGN_OR_RETURN(int64_t v, Int(name));
  if (v < min || v > max) {
    return core::Fail(FieldError(Path(name), "must be an integer from " + std::to_string(min) +
                                                 " to " + std::to_string(max)));
  }
  return v;
}

core::Result<uint64_t> FieldReader::Uint(std::string_view name) const {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* v, Present(name));
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer() && v->get<int64_t>() >= 0) {
    return static_cast<uint64_t>(v->get<int64_t>());
  }
  return core::Fail(FieldError(Path(name), "must be a non-negative integer"));
}

core::Result<bool> FieldReader::Bool(std::string_view name) const {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* v, Present(name));
  if (!v->is_boolean()) return core::Fail(FieldError(Path(name), "must be a boolean"));
  return v->get<bool>();
}

core::Result<std::vector<std::string>> FieldReader::Strings(std::string_view name) const {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* v, Array(name));
  std::vector<std::string> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) return core::Fail(FieldError(Path(name, i), "must be a string"));
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

core::Result<const nlohmann::json*> FieldReader::Array(std::string_view name) const {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* v, Present(name));
  if (!v->is_array()) return core::Fail(FieldError(Path(name), "must be an array"));
  return v;
}

core::Result<const nlohmann::json*> FieldReader::Object(std::string_view name) const {
  GPUWERK_ASSIGN_OR_RETURN(const nlohmann::json* v, Present(name));
  if (!v->is_object()) return core::Fail(FieldError(Path(name), "must be an object"));
  return v;
}

}  // namespace gpuwerk::protocol::internal
