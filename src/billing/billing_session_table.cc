#include "billing/billing_session_table.h"

namespace gpuwerk::billing {
namespace {

constexpr const char* kColumns =
    "id, instance_id, person_id, billing_account_id, instance_name, gpu_type, "
    "price_minor_per_hour, currency, started_at, ended_at, evidence_at, "
    "evidence_container_started";

BillingSessionRow SessionFromRow(const store::Row& r) {
  return {.id = r.Text("id"),
          .instance_id = r.Text("instance_id"),
          .person_id = r.Text("person_id"),
          .billing_account_id = r.Text("billing_account_id"),
          .instance_name = r.Text("instance_name"),
          .gpu_type = r.Text("gpu_type"),
          .price_minor_per_hour = r.Int("price_minor_per_hour"),
          .currency = r.Text("currency"),
          .started_at = r.Int("started_at"),
          .ended_at = r.OptInt("ended_at"),
          .evidence_at = r.Int("evidence_at"),
          .evidence_container_started = r.Text("evidence_container_started")};
}

}  // namespace

core::Result<void> BillingSessionTable::Insert(store::Transaction& tx, BillingSessionRow row) {
  if (row.evidence_at == 0) row.evidence_at = row.started_at;
  GPUWERK_TRY(
      tx.Exec("INSERT INTO billing_sessions (id, instance_id, person_id, billing_account_id, "
              "instance_name, gpu_type, price_minor_per_hour, currency, started_at, evidence_at, "
              "evidence_container_started) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
              {row.id, row.instance_id, row.person_id, row.billing_account_id, row.instance_name,
               row.gpu_type, row.price_minor_per_hour, row.currency, row.started_at,
               row.evidence_at, row.evidence_container_started}));
  return {};
}

core::Result<void> BillingSessionTable::End(store::Transaction& tx, const std::string& id,
                                            int64_t now) {
  GPUWERK_TRY(tx.Exec("UPDATE billing_sessions SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
                      {now, id}));
  return {};
}

core::Result<std::optional<int64_t>> BillingSessionTable::StartedAt(store::Transaction& tx,
                                                                    const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT started_at FROM billing_sessions WHERE id = ?", {id}));
  if (!row) return std::optional<int64_t>();
  return std::optional<int64_t>(row->Int("started_at"));
}

core::Result<std::optional<BillingSessionRow>> BillingSessionTable::Find(store::Transaction& tx,
                                                                         const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne(std::string("SELECT ") + kColumns + " FROM billing_sessions WHERE id = ?", {id}));
  if (!row) return std::optional<BillingSessionRow>();
  return std::optional<BillingSessionRow>(SessionFromRow(*row));
}

core::Result<void> BillingSessionTable::SetEvidence(store::Transaction& tx, const std::string& id,
                                                    int64_t evidence_at,
                                                    const std::string& container_started) {
  GPUWERK_TRY(tx.Exec(
      "UPDATE billing_sessions SET evidence_at = ?, evidence_container_started = ? WHERE id = ?",
      {evidence_at, container_started, id}));
  return {};
}

core::Result<void> BillingSessionTable::AddGap(store::Transaction& tx, const std::string& id,
                                               Segment gap) {
  if (gap.to <= gap.from) return {};
  GPUWERK_TRY(tx.Exec("INSERT INTO billing_gaps (session_id, from_at, to_at) VALUES (?, ?, ?)",
                      {id, gap.from, gap.to}));
  return {};
}

core::Result<std::vector<Segment>> BillingSessionTable::Gaps(store::Transaction& tx,
                                                             const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(auto rows,
                           tx.Query("SELECT from_at, to_at FROM billing_gaps WHERE session_id = ? "
                                    "ORDER BY from_at",
                                    {id}));
  std::vector<Segment> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back({.from = r.Int("from_at"), .to = r.Int("to_at")});
  return out;
}

}  // namespace gpuwerk::billing
