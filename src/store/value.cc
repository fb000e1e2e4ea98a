#include "store/value.h"

#include <charconv>
#include <stdexcept>

namespace gpuwerk::store {

size_t Row::Index(std::string_view column) const {
  if (names_) {
    for (size_t i = 0; i < names_->size(); ++i) {
      if ((*names_)[i] == column) return i;
    }
  }
  throw std::out_of_range("no column named " + std::string(column) + " in this result");
}

std::string Row::Text(size_t i) const {
  const Value& v = values_.at(i);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  if (auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (auto* d = std::get_if<double>(&v)) return std::to_string(*d);
  return "";
}

int64_t Row::Int(size_t i) const {
  const Value& v = values_.at(i);
  if (auto* n = std::get_if<int64_t>(&v)) return *n;
  if (auto* d = std::get_if<double>(&v)) return static_cast<int64_t>(*d);
  if (auto* s = std::get_if<std::string>(&v)) {
    int64_t out = 0;
    std::from_chars(s->data(), s->data() + s->size(), out);
    return out;
  }
  return 0;
}

std::optional<std::string> Row::OptText(size_t i) const {
  if (IsNull(i)) return std::nullopt;
  return Text(i);
}

std::optional<int64_t> Row::OptInt(size_t i) const {
  if (IsNull(i)) return std::nullopt;
  return Int(i);
}

}  // namespace gpuwerk::store
