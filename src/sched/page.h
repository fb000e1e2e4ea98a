#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace gpuwerk::sched {

/// Rows a listing page holds (R-16: 15 a page).
inline constexpr int kPageSize = 15;

/// One page of a listing, paged in the store (LIMIT/OFFSET and a COUNT), as the API answers it:
/// `items`, the 1-based `page`, how many `pages` there are (at least 1) and the `total` of rows.
template <class T>
struct Page {
  std::vector<T> items;
  int page = 1;
  int pages = 1;
  int64_t total = 0;
};

/// Fails kInvalidArgument invalid_page unless 1 ≤ `page` ≤ 1,000,000.
inline core::Result<void> CheckPage(int page) {
  if (page < 1 || page > 1'000'000) {
    return core::InvalidArgument("invalid_page", "page must be a whole number from 1.");
  }
  return {};
}

/// How many pages `total` rows fill (at least 1).
inline int PageCount(int64_t total) {
  return static_cast<int>(total <= 0 ? 1 : (total + kPageSize - 1) / kPageSize);
}

/// The OFFSET of 1-based `page`.
inline int64_t PageOffset(int page) { return int64_t{page - 1} * kPageSize; }

}  // namespace gpuwerk::sched
