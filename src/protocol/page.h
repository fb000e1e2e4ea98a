#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gpuwerk::protocol {

/// One page of a list of the gpuwerk API (DESIGN.md "The public API": `?page=N`, 1-based, 15
/// rows): `{"items": [...], "page": N, "pages": M, "total": T}`, and on keyset-paged lists
/// `"next"` / `"prev"` cursors. The items stay JSON: each list
/// has its own item shape.
struct Page {
  nlohmann::json items = nlohmann::json::array();  ///< this page's rows, an array
  int64_t page = 1;                                ///< this page's number, from 1
  int64_t pages = 0;                               ///< how many pages there are
  int64_t total = 0;                               ///< how many rows there are in all
  /// Keyset-paged lists only (GET /api/v1/usage/sessions; docs/api.md "Pages"): the cursor of
  /// the page of older rows (`?before=`) and of newer rows (`?after=`). Members present only when
  /// there is such a page; "" here when absent. Pages by cursor hold still while rows arrive.
  std::string next;
  std::string prev;

  bool operator==(const Page&) const = default;
};

nlohmann::json ToJson(const Page& page);
/// Strict: `items` an array, `page`, `pages` and `total` non-negative integers, `next` and `prev`
/// strings when present. Errors:
/// kInvalidArgument "invalid_field" naming the member.
core::Result<Page> PageFromJson(const nlohmann::json& json);

}  // namespace gpuwerk::protocol
