#include "sched/internal/gpu_type_table.h"

namespace gpuwerk::sched::internal {
namespace {

constexpr const char* kSelect =
    "SELECT name, description, hosts_per_instance, price_minor_per_hour, currency FROM gpu_types";

GpuTypeConfig TypeOf(const store::Row& r) {
  return GpuTypeConfig{.name = r.Text("name"),
                       .description = r.Text("description"),
                       .hosts_per_instance = r.Int("hosts_per_instance"),
                       .price_minor_per_hour = r.Int("price_minor_per_hour"),
                       .currency = r.Text("currency")};
}

}  // namespace

core::Result<std::optional<GpuTypeConfig>> GpuTypeTable::Find(store::Transaction& tx,
                                                              const std::string& name) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne(std::string(kSelect) + " WHERE name = ?", {name}));
  if (!row) return std::optional<GpuTypeConfig>();
  return std::optional<GpuTypeConfig>(TypeOf(*row));
}

core::Result<std::vector<GpuTypeConfig>> GpuTypeTable::List(store::Transaction& tx, int64_t limit,
                                                            int64_t offset) {
  std::vector<store::Row> rows;
  if (limit < 0) {
    GPUWERK_ASSIGN_OR_RETURN(rows, tx.Query(std::string(kSelect) + " ORDER BY name"));
  } else {
    GPUWERK_ASSIGN_OR_RETURN(
        rows, tx.Query(std::string(kSelect) + " ORDER BY name LIMIT ? OFFSET ?", {limit, offset}));
  }
  std::vector<GpuTypeConfig> out;
  for (const auto& r : rows) out.push_back(TypeOf(r));
  return out;
}

core::Result<int64_t> GpuTypeTable::Count(store::Transaction& tx) {
  GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM gpu_types"));
  return row->Int("n");
}

core::Result<void> GpuTypeTable::Insert(store::Transaction& tx, const GpuTypeConfig& t) {
  GPUWERK_TRY(
      tx.Exec("INSERT INTO gpu_types (name, description, hosts_per_instance, price_minor_per_hour, "
              "currency) VALUES (?, ?, ?, ?, ?)",
              {t.name, t.description, t.hosts_per_instance, t.price_minor_per_hour, t.currency}));
  return {};
}

core::Result<void> GpuTypeTable::Update(store::Transaction& tx, const GpuTypeConfig& t) {
  GPUWERK_TRY(
      tx.Exec("UPDATE gpu_types SET description = ?, hosts_per_instance = ?, "
              "price_minor_per_hour = ?, currency = ? WHERE name = ?",
              {t.description, t.hosts_per_instance, t.price_minor_per_hour, t.currency, t.name}));
  return {};
}

}  // namespace gpuwerk::sched::internal
