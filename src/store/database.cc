#include "store/database.h"

namespace gpuwerk::store {

core::Result<std::optional<Row>> Transaction::QueryOne(std::string_view sql,
                                                       std::initializer_list<Value> params) {
  auto rows = Query(sql, params);
  if (!rows) return std::unexpected(rows.error());
  if (rows->empty()) return std::optional<Row>();
  return std::optional<Row>(std::move(rows->front()));
}

}  // namespace gpuwerk::store
