#include "store/database.h"

namespace gpuwerk::store {

core::Result<std::optional<Row>> Transaction::QueryOne(std::string_view sql,
                                                       std::initializer_list<Value> params) {
  auto rows = Query(sql, params);
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::optional<Row>();
  return std::optional<Row>(std::move(rows->front()));
}

bool IsBusy(const core::Error& error) { return error.reason == core::ErrorReason::kStoreBusy; }

bool IsConstraintViolation(const core::Error& error) {
  return error.reason == core::ErrorReason::kStoreConstraintViolation;
}

bool IsUniqueViolation(const core::Error& error) {
  return IsConstraintViolation(error) && error.code == core::ErrorCode::kAlreadyExists;
}

bool IsStorageFull(const core::Error& error) {
  return error.reason == core::ErrorReason::kStoreFull;
}

core::Error StorageFullError() {
  return core::Error(core::ErrorCode::kUnavailable, "storage_full",
                     "The server's storage is full, so nothing can be saved now; the operator "
                     "has been told. Try again later.")
      .WithReason(core::ErrorReason::kStoreFull)
      .WithDetail("retry_after_seconds", 30);
}

core::Error BusyError(std::string message) {
  return core::Error(core::ErrorCode::kUnavailable, "store_busy", std::move(message))
      .WithReason(core::ErrorReason::kStoreBusy);
}

core::Error ConstraintViolationError(bool unique, std::string message) {
  return core::Error(
             unique ? core::ErrorCode::kAlreadyExists : core::ErrorCode::kFailedPrecondition,
             "constraint_violation", std::move(message))
      .WithReason(core::ErrorReason::kStoreConstraintViolation);
}

}  // namespace gpuwerk::store
