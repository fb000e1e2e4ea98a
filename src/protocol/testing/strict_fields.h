#pragma once
// Test-only: checks that a protocol FromJson refuses every missing member and every member of
// the wrong JSON type, naming it (kInvalidArgument "invalid_field", details {"field": path}).

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/error.h"

namespace gpuwerk::protocol::testing {

/// Calls `visit(pointer, path)` for every member of every object in `value` (recursively; of an
/// array, every element), `path` spelled as the protocol's errors spell it ("a.b[0].c").
inline void ForEachMember(
    const nlohmann::json& value, const nlohmann::json::json_pointer& pointer,
    const std::string& path,
    const std::function<void(const nlohmann::json::json_pointer&, const std::string&)>& visit) {
  if (value.is_object()) {
    for (const auto& [key, member] : value.items()) {
      const std::string member_path = path.empty() ? key : path + "." + key;
      visit(pointer / key, member_path);
      ForEachMember(member, pointer / key, member_path, visit);
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string element_path = path + "[" + std::to_string(i) + "]";
      visit(pointer / i, element_path);
      ForEachMember(value[i], pointer / i, element_path, visit);
    }
  }
}

/// A value of another JSON type than `v`'s.
inline nlohmann::json WrongType(const nlohmann::json& v) {
  if (v.is_string()) return 1;
  return "x";
}

/// For `valid` (which `parse` accepts): removing each object member not in `optional` is refused
/// naming it; giving any member or array element the wrong type is refused naming it.
template <class Parse>
void ExpectStrict(const nlohmann::json& valid, Parse parse,
                  const std::set<std::string>& optional = {}) {
  {
    auto ok = parse(valid);
    ASSERT_TRUE(ok) << ok.error().message << " for " << valid.dump();
  }
  ForEachMember(valid, nlohmann::json::json_pointer(), "",
                [&](const nlohmann::json::json_pointer& ptr, const std::string& path) {
                  const bool is_element = path.ends_with("]");
                  if (!is_element) {
                    nlohmann::json missing = valid;
                    missing[ptr.parent_pointer()].erase(ptr.back());
                    auto r = parse(missing);
                    if (optional.contains(path)) {
                      EXPECT_TRUE(r) << "optional " << path << ": " << r.error().message;
                    } else {
                      ASSERT_FALSE(r) << "missing " << path << " was accepted";
                      EXPECT_EQ(r.error().code, core::ErrorCode::kInvalidArgument) << path;
                      EXPECT_EQ(r.error().api_code, "invalid_field") << path;
                      EXPECT_EQ(r.error().details.value("field", ""), path) << r.error().message;
                      EXPECT_NE(r.error().message.find(path), std::string::npos)
                          << r.error().message;
                    }
                  }
                  nlohmann::json wrong = valid;
                  wrong[ptr] = WrongType(valid[ptr]);
                  auto r = parse(wrong);
                  ASSERT_FALSE(r) << "a wrongly typed " << path << " was accepted";
                  EXPECT_EQ(r.error().code, core::ErrorCode::kInvalidArgument) << path;
                  EXPECT_EQ(r.error().api_code, "invalid_field") << path;
                  EXPECT_EQ(r.error().details.value("field", ""), path) << r.error().message;
                });
}

}  // namespace gpuwerk::protocol::testing
