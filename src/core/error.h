#pragma once

#include <expected>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

namespace gpuwerk::core {

/// The closed set of error kinds (modelled on Abseil's canonical codes). Each maps to one HTTP
/// status in api/http_types.h (HttpStatusFor); the stable, machine-readable API `code` travels
/// beside it in Error.
enum class ErrorCode {
  kInvalidArgument,     ///< the caller sent something malformed (400)
  kNotFound,            ///< no such thing, or not the caller's to see (404)
  kAlreadyExists,       ///< a unique name or key is taken (409)
  kFailedPrecondition,  ///< the system is not in a state that allows this (409)
  kPaymentRequired,     ///< a payment method is needed first (402)
  kUnauthenticated,     ///< no or bad credentials (401)
  kPermissionDenied,    ///< authenticated, but not allowed (403)
  kResourceExhausted,   ///< a rate limit or quota was hit (429)
  kPayloadTooLarge,     ///< the request body is over the limit (413)
  kUnavailable,         ///< a dependency is down; retrying later may work (503)
  kDeadlineExceeded,    ///< a dependency did not answer in time (504)
  kInternal,            ///< a bug or an invariant broken on our side (500)
};

/// A finer, typed reason than ErrorCode for the few failures internal code decides on (retry a
/// transaction, a lost race), so that no caller compares `api_code` labels. Each value is set
/// by one module only, which documents it; every other error has kNone.
enum class ErrorReason {
  kNone,
  kStoreBusy,                 ///< store: another writer held the database past the busy timeout
  kStoreConstraintViolation,  ///< store: a schema constraint (unique, key, check) refused a write
  kStoreFull                  ///< store: the disk (or the database's size limit) is full
};

/// The name of an ErrorCode, e.g. "invalid_argument".
std::string_view ErrorCodeName(ErrorCode code);

/// An expected failure, carried as a value. `api_code` is the stable string clients match on
/// (e.g. "private_key_pasted"); `message` is for people and never contains secrets or the
/// caller's input verbatim; `details` holds optional structured extras (e.g. the instances that
/// keep a key in use) and is copied into the problem JSON. `reason` is for internal decisions
/// only and never leaves the process.
struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string api_code;
  std::string message;
  nlohmann::json details = nlohmann::json::object();
  ErrorReason reason = ErrorReason::kNone;

  Error() = default;
  Error(ErrorCode c, std::string api, std::string msg)
      : code(c), api_code(std::move(api)), message(std::move(msg)) {}

  Error&& WithDetail(const std::string& key, nlohmann::json value) && {
    details[key] = std::move(value);
    return std::move(*this);
  }
  Error&& WithReason(ErrorReason r) && {
    reason = r;
    return std::move(*this);
  }
};

/// Result<T>: a T or an Error (std::expected, C++23).
template <class T>
using Result = std::expected<T, Error>;

/// Shorthand to build the unexpected side: `return Fail(ErrorCode::kNotFound, "not_found", "…")`.
inline std::unexpected<Error> Fail(ErrorCode code, std::string api_code, std::string message) {
  return std::unexpected<Error>(Error(code, std::move(api_code), std::move(message)));
}
inline std::unexpected<Error> Fail(Error e) { return std::unexpected<Error>(std::move(e)); }

/// Common errors.
inline std::unexpected<Error> NotFound(std::string what) {
  return Fail(ErrorCode::kNotFound, "not_found", std::move(what) + " not found");
}
inline std::unexpected<Error> InvalidArgument(std::string api_code, std::string message) {
  return Fail(ErrorCode::kInvalidArgument, std::move(api_code), std::move(message));
}
inline std::unexpected<Error> Internal(std::string message) {
  return Fail(ErrorCode::kInternal, "internal", std::move(message));
}

}  // namespace gpuwerk::core

/// Propagates the error of a Result-returning expression: `GPUWERK_TRY(tx.Exec(...));`
#define GPUWERK_TRY(expr)                                                                     \
  do {                                                                                        \
    auto&& gpuwerk_try_result_ = (expr);                                                      \
    if (!gpuwerk_try_result_) return std::unexpected(std::move(gpuwerk_try_result_).error()); \
  } while (0)

#define GPUWERK_CONCAT_INNER_(a, b) a##b
#define GPUWERK_CONCAT_(a, b) GPUWERK_CONCAT_INNER_(a, b)
/// Declares `lhs` from a Result's value or returns its error: `GPUWERK_ASSIGN_OR_RETURN(auto rows,
/// tx.Query(...));`
#define GPUWERK_ASSIGN_OR_RETURN(lhs, expr)                                             \
  auto GPUWERK_CONCAT_(gpuwerk_aor_, __LINE__) = (expr);                                \
  if (!GPUWERK_CONCAT_(gpuwerk_aor_, __LINE__))                                         \
    return std::unexpected(std::move(GPUWERK_CONCAT_(gpuwerk_aor_, __LINE__)).error()); \
  lhs = std::move(*GPUWERK_CONCAT_(gpuwerk_aor_, __LINE__))
