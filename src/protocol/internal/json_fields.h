#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace gpuwerk::protocol::internal {

/// The error every protocol conversion returns for a bad field: kInvalidArgument, api code
/// "invalid_field", the message "field '<path>' <what>" and details {"field": path}.
core::Error FieldError(std::string_view path, std::string_view what);

/// Reads the members of one JSON object strictly: a member that is missing or null, or has
/// another JSON type than asked, is an error (FieldError) naming it as `prefix` + name, e.g.
/// "inventory.gpus[0].name". Nothing is defaulted. The object must outlive the reader.
class FieldReader {
 public:
  /// Errors: FieldError(`path`, "must be an object") when `value` is not an object; `path` ""
  /// names the whole body ("body").
  static core::Result<FieldReader> Open(const nlohmann::json& value, std::string path);

  core::Result<std::string> String(std::string_view name) const;
  /// String() of `min_len`..`max_len` characters (Unicode code points); errors say "must not be
  /// empty" or "must be at most N characters".
  core::Result<std::string> String(std::string_view name, size_t max_len, size_t min_len = 0) const;
  /// A signed integer (a JSON number without a fraction that fits int64).
  core::Result<int64_t> Int(std::string_view name) const;
  /// Int() within [min, max]; errors name the range.
  core::Result<int64_t> IntIn(std::string_view name, int64_t min, int64_t max) const;
  /// An unsigned integer that fits uint64.
  core::Result<uint64_t> Uint(std::string_view name) const;
  core::Result<bool> Bool(std::string_view name) const;
  /// An array of strings.
  core::Result<std::vector<std::string>> Strings(std::string_view name) const;
  /// An array (of anything); its elements are named `name[i]` by Path().
  core::Result<const nlohmann::json*> Array(std::string_view name) const;
  /// An object member (for nested readers: Open(*value, Path(name))).
  core::Result<const nlohmann::json*> Object(std::string_view name) const;
  /// Whether `name` is present and not null (for members the format makes optional).
  bool Has(std::string_view name) const;
  /// Refuses a member whose name is not in `names`: FieldError(Path(member), "is not a member
  /// of this message"). For what a peer sends the server (R-19: unknown fields are refused).
  core::Result<void> Only(std::initializer_list<std::string_view> names) const;

  /// The full name of member `name`, e.g. "inventory.cpus".
  std::string Path(std::string_view name) const;
  /// The full name of element `index` of array member `name`, e.g. "containers[2]".
  std::string Path(std::string_view name, size_t index) const;

 private:
  FieldReader(const nlohmann::json& object, std::string prefix)
      : object_(&object), prefix_(std::move(prefix)) {}
  core::Result<const nlohmann::json*> Present(std::string_view name) const;

  const nlohmann::json* object_;
  std::string prefix_;  ///< "" for the top level, else "a.b."
};

}  // namespace gpuwerk::protocol::internal
