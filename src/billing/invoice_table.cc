#include "billing/invoice_table.h"

#include <unordered_map>

namespace gpuwerk::billing {
namespace {

InvoiceRow InvoiceFromRow(const store::Row& r) {
  return {.id = r.Text("id"),
          .billing_account_id = r.Text("billing_account_id"),
          .month = r.Text("month"),
          .currency = r.Text("currency"),
          .total_minor = r.Int("total_minor"),
          .created_at = r.Int("created_at"),
          .lines = {}};
}

InvoiceLineRow LineFromRow(const store::Row& r) {
  return {.invoice_id = r.Text("invoice_id"),
          .session_id = r.Text("session_id"),
          .instance_id = r.Text("instance_id"),
          .instance_name = r.Text("instance_name"),
          .gpu_type = r.Text("gpu_type"),
          .person_id = r.Text("person_id"),
          .minutes = r.Int("minutes"),
          .price_minor_per_hour = r.Int("price_minor_per_hour"),
          .amount_minor = r.Int("amount_minor")};
}

/// Attaches the `lines` rows to their invoices in `invoices`.
void Attach(std::vector<InvoiceRow>& invoices, const std::vector<store::Row>& lines) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < invoices.size(); ++i) index.emplace(invoices[i].id, i);
  for (const auto& l : lines) {
    auto it = index.find(l.Text("invoice_id"));
    if (it != index.end()) invoices[it->second].lines.push_back(LineFromRow(l));
  }
}

constexpr const char* kLineColumns =
    "l.invoice_id, l.session_id, l.instance_id, l.instance_name, l.gpu_type, l.person_id, "
    "l.minutes, l.price_minor_per_hour, l.amount_minor";

/// The invoices matching `where` (one "column = ?" condition on `invoices`, a constant of this
/// file) with `value` bound, in `order`, each with its lines (by session id): two statements
/// whatever the count.
core::Result<std::vector<InvoiceRow>> WithLines(store::Transaction& tx, const std::string& where,
                                                const std::string& value,
                                                const std::string& order) {
  GPUWERK_ASSIGN_OR_RETURN(auto rows,
                           tx.Query("SELECT id, billing_account_id, month, currency, total_minor, "
                                    "created_at FROM invoices WHERE " +
                                        where + " ORDER BY " + order,
                                    {value}));
  std::vector<InvoiceRow> out;
  for (const auto& r : rows) out.push_back(InvoiceFromRow(r));
  if (out.empty()) return out;
  GPUWERK_ASSIGN_OR_RETURN(
      auto lines, tx.Query(std::string("SELECT ") + kLineColumns +
                               " FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id "
                               "WHERE i." +
                               where + " ORDER BY l.invoice_id, l.session_id",
                           {value}));
  Attach(out, lines);
  return out;
}

}  // namespace

core::Result<bool> InvoiceTable::InsertIfAbsent(store::Transaction& tx, const InvoiceRow& row) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n,
      tx.Exec("INSERT INTO invoices (id, billing_account_id, month, currency, total_minor, "
              "created_at) VALUES (?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (billing_account_id, month, currency) DO NOTHING",
              {row.id, row.billing_account_id, row.month, row.currency, row.total_minor,
               row.created_at}));
  return n > 0;
}

core::Result<void> InvoiceTable::InsertLine(store::Transaction& tx, const InvoiceLineRow& line) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO invoice_lines (invoice_id, session_id, instance_id, instance_name, "
      "gpu_type, person_id, minutes, price_minor_per_hour, amount_minor) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      {line.invoice_id, line.session_id, line.instance_id, line.instance_name, line.gpu_type,
       line.person_id, line.minutes, line.price_minor_per_hour, line.amount_minor}));
  return {};
}

core::Result<std::set<std::string>> InvoiceTable::SessionsBilledIn(store::Transaction& tx,
                                                                   const std::string& month) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query("SELECT l.session_id FROM invoice_lines l JOIN invoices i ON i.id = "
                          "l.invoice_id WHERE i.month = ?",
                          {month}));
  std::set<std::string> out;
  for (const auto& r : rows) out.insert(r.Text("session_id"));
  return out;
}

core::Result<bool> InvoiceTable::MarkClosed(store::Transaction& tx, const std::string& month,
                                            int64_t now, int64_t invoices) {
  GPUWERK_ASSIGN_OR_RETURN(int64_t n, tx.Exec("INSERT INTO invoice_months_closed (month, "
                                              "closed_at, invoices) VALUES (?, ?, ?) "
                                              "ON CONFLICT (month) DO NOTHING",
                                              {month, now, invoices}));
  return n > 0;
}

core::Result<std::optional<int64_t>> InvoiceTable::ClosedAt(store::Transaction& tx,
                                                            const std::string& month) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne("SELECT closed_at FROM invoice_months_closed WHERE month = ?", {month}));
  if (!row) return std::optional<int64_t>();
  return std::optional<int64_t>(row->Int("closed_at"));
}

core::Result<std::vector<InvoiceRow>> InvoiceTable::OfAccount(store::Transaction& tx,
                                                              const std::string& account_id) {
  return WithLines(tx, "billing_account_id = ?", account_id, "month DESC, currency, id");
}

core::Result<std::vector<InvoiceRow>> InvoiceTable::OfMonth(store::Transaction& tx,
                                                            const std::string& month) {
  return WithLines(tx, "month = ?", month, "billing_account_id, currency");
}

}  // namespace gpuwerk::billing
