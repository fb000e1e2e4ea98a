#include "billing/billing_session_table.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

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

core::Result<int64_t> BillingSessionTable::MoveOpen(store::Transaction& tx,
                                                    const std::string& person_id,
                                                    const std::string& from_account_id,
                                                    const std::string& to_account_id) {
  return tx.Exec(
      "UPDATE billing_sessions SET billing_account_id = ? "
      "WHERE person_id = ? AND billing_account_id = ? AND ended_at IS NULL",
      {to_account_id, person_id, from_account_id});
}

namespace {

constexpr const char* kAliasedColumns =
    "s.id, s.instance_id, s.person_id, s.billing_account_id, s.instance_name, s.gpu_type, "
    "s.price_minor_per_hour, s.currency, s.started_at, s.ended_at, s.evidence_at, "
    "s.evidence_container_started";

/// Runs one statement with the caller's bound parameters.
using RunQuery = std::function<core::Result<std::vector<store::Row>>(const std::string& sql)>;

/// Reads the sessions `where` selects (alias s) in `order` (and `limit`), then their gaps: two
/// statements with the same parameters, bound by `run`.
core::Result<std::vector<SessionWithGaps>> ReadWithGaps(const RunQuery& run,
                                                        const std::string& where,
                                                        const std::string& order,
                                                        const std::string& limit = "") {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, run(std::string("SELECT ") + kAliasedColumns + " FROM billing_sessions s WHERE " +
                     where + " ORDER BY " + order + limit));
  std::vector<SessionWithGaps> out;
  out.reserve(rows.size());
  std::unordered_map<std::string, size_t> index;
  for (const auto& r : rows) {
    index.emplace(r.Text("id"), out.size());
    out.push_back({.session = SessionFromRow(r), .gaps = {}});
  }
  if (out.empty()) return out;
  GPUWERK_ASSIGN_OR_RETURN(
      auto gaps, run("SELECT g.session_id, g.from_at, g.to_at FROM billing_gaps g WHERE "
                     "g.session_id IN (SELECT s.id FROM billing_sessions s WHERE " +
                     where + " ORDER BY " + order + limit + ") ORDER BY g.session_id, g.from_at"));
  for (const auto& g : gaps) {
    auto it = index.find(g.Text("session_id"));
    if (it == index.end()) continue;
    out[it->second].gaps.push_back({.from = g.Int("from_at"), .to = g.Int("to_at")});
  }
  return out;
}

}  // namespace

core::Result<std::vector<SessionWithGaps>> BillingSessionTable::ListOverlapping(
    store::Transaction& tx, int64_t from, int64_t to) {
  return ReadWithGaps(
      [&](const std::string& sql) {
        return tx.Query(sql, {to, from});
      },
      "s.started_at < ? AND (s.ended_at IS NULL OR s.ended_at >= ?)",
      "s.billing_account_id, s.started_at, s.id");
}

core::Result<std::vector<SessionWithGaps>> BillingSessionTable::ListOverlappingOfAccount(
    store::Transaction& tx, const std::string& account_id, int64_t from, int64_t to) {
  return ReadWithGaps(
      [&](const std::string& sql) {
        return tx.Query(sql, {account_id, to, from});
      },
      "s.billing_account_id = ? AND s.started_at < ? AND (s.ended_at IS NULL OR s.ended_at >= ?)",
      "s.started_at, s.id");
}

core::Result<std::vector<SessionWithGaps>> BillingSessionTable::ListOverlappingOfPerson(
    store::Transaction& tx, const std::string& person_id, int64_t from, int64_t to) {
  return ReadWithGaps(
      [&](const std::string& sql) {
        return tx.Query(sql, {person_id, to, from});
      },
      "s.person_id = ? AND s.started_at < ? AND (s.ended_at IS NULL OR s.ended_at >= ?)",
      "s.started_at, s.id");
}

core::Result<std::vector<SessionWithGaps>> BillingSessionTable::PageOfPerson(
    store::Transaction& tx, const std::string& person_id, std::optional<SessionKey> before,
    std::optional<SessionKey> after, int64_t limit) {
  const std::string lim = " LIMIT " + std::to_string(std::max<int64_t>(limit, 0));
  if (before) {
    return ReadWithGaps(
        [&](const std::string& sql) {
          return tx.Query(sql, {person_id, before->started_at, before->started_at, before->id});
        },
        "s.person_id = ? AND (s.started_at < ? OR (s.started_at = ? AND s.id < ?))",
        "s.started_at DESC, s.id DESC", lim);
  }
  if (after) {
    GPUWERK_ASSIGN_OR_RETURN(
        auto rows,
        ReadWithGaps(
            [&](const std::string& sql) {
              return tx.Query(sql, {person_id, after->started_at, after->started_at, after->id});
            },
            "s.person_id = ? AND (s.started_at > ? OR (s.started_at = ? AND s.id > ?))",
            "s.started_at ASC, s.id ASC", lim));
    std::reverse(rows.begin(), rows.end());
    return rows;
  }
  return ReadWithGaps([&](const std::string& sql) { return tx.Query(sql, {person_id}); },
                      "s.person_id = ?", "s.started_at DESC, s.id DESC", lim);
}

core::Result<int64_t> BillingSessionTable::CountOfPerson(store::Transaction& tx,
                                                         const std::string& person_id,
                                                         std::optional<SessionKey> newer_than) {
  std::optional<store::Row> row;
  if (newer_than) {
    GPUWERK_ASSIGN_OR_RETURN(
        row,
        tx.QueryOne("SELECT COUNT(*) FROM billing_sessions WHERE person_id = ? AND "
                    "(started_at > ? OR (started_at = ? AND id > ?))",
                    {person_id, newer_than->started_at, newer_than->started_at, newer_than->id}));
  } else {
    GPUWERK_ASSIGN_OR_RETURN(
        row, tx.QueryOne("SELECT COUNT(*) FROM billing_sessions WHERE person_id = ?", {person_id}));
  }
  return row ? row->Int(0) : 0;
}

}  // namespace gpuwerk::billing
