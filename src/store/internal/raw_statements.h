#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store::internal {

/// Statements whose parameters are known only at run time, answering rows as the backend gave
/// them (each value's type as read: NULL, integer, real or text): what a schema-generic reader
/// and writer needs (store::CopyDatabase), which the Transaction seam's braced parameter lists
/// and by-name Row accessors do not give. Both backends' transactions implement it; only store/
/// uses it.
class RawStatements {
 public:
  virtual ~RawStatements() = default;
  /// Runs a statement that returns rows, `params` bound in order. Errors: as Transaction::Query.
  virtual core::Result<std::vector<std::vector<Value>>> QueryRaw(std::string_view sql,
                                                                 std::span<const Value> params) = 0;
  /// Runs a statement; returns the number of rows it changed. Errors: as Transaction::Exec.
  virtual core::Result<int64_t> ExecRaw(std::string_view sql, std::span<const Value> params) = 0;
};

/// `tx` as RawStatements. Errors: kInternal when its backend has none (a wrapping test double).
inline core::Result<RawStatements*> Raw(Transaction& tx) {
  auto* raw = dynamic_cast<RawStatements*>(&tx);
  if (!raw) return core::Internal("this transaction cannot run run-time parameter lists");
  return raw;
}

}  // namespace gpuwerk::store::internal
