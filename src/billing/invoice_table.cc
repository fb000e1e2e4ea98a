#include "billing/invoice_table.h"

#include <unordered_map>

#include "core/strings.h"

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

constexpr const char* kPushColumns =
    "i.id, i.billing_account_id, i.month, i.currency, i.total_minor, i.created_at, p.provider, "
    "p.queued_at, p.attempts, p.next_attempt_at, p.last_error_code, p.last_error, p.provider_ref, "
    "p.pushed_at";

InvoicePushRow PushFromRow(const store::Row& r) {
  return {.invoice = InvoiceFromRow(r),
          .provider = r.Text("provider"),
          .queued_at = r.Int("queued_at"),
          .attempts = r.Int("attempts"),
          .next_attempt_at = r.Int("next_attempt_at"),
          .last_error_code = r.Text("last_error_code"),
          .last_error = r.Text("last_error"),
          .provider_ref = r.Text("provider_ref"),
          .pushed_at = r.OptInt("pushed_at")};
}

/// Attaches the `lines` rows to their pushes' invoices in `pushes`.
void AttachToPushes(std::vector<InvoicePushRow>& pushes, const std::vector<store::Row>& lines) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < pushes.size(); ++i) index.emplace(pushes[i].invoice.id, i);
  for (const auto& l : lines) {
    auto it = index.find(l.Text("invoice_id"));
    if (it != index.end()) pushes[it->second].invoice.lines.push_back(LineFromRow(l));
  }
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

core::Result<void> InvoiceTable::QueuePush(store::Transaction& tx, const std::string& invoice_id,
                                           const std::string& provider, int64_t now) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO invoice_pushes (invoice_id, provider, queued_at, next_attempt_at) VALUES "
      "(?, ?, ?, ?) ON CONFLICT (invoice_id) DO NOTHING",
      {invoice_id, provider, now, now}));
  return {};
}

core::Result<std::vector<InvoicePushRow>> InvoiceTable::PendingPushes(store::Transaction& tx,
                                                                      const std::string& provider,
                                                                      const std::string& month,
                                                                      int64_t due_by,
                                                                      int64_t limit) {
  std::vector<store::Row> rows;
  std::vector<store::Row> lines;
  if (month.empty()) {
    constexpr const char* kDue =
        "p.provider = ? AND p.pushed_at IS NULL AND p.next_attempt_at <= ? "
        "ORDER BY p.next_attempt_at, p.invoice_id LIMIT ?";
    GPUWERK_ASSIGN_OR_RETURN(
        rows,
        tx.Query(std::string("SELECT ") + kPushColumns +
                     " FROM invoice_pushes p JOIN invoices i ON i.id = p.invoice_id WHERE " + kDue,
                 {provider, due_by, limit}));
    if (rows.empty()) return std::vector<InvoicePushRow>();
    GPUWERK_ASSIGN_OR_RETURN(
        lines, tx.Query(std::string("SELECT ") + kLineColumns +
                            " FROM invoice_lines l WHERE l.invoice_id IN (SELECT p.invoice_id "
                            "FROM invoice_pushes p WHERE " +
                            kDue + ") ORDER BY l.invoice_id, l.session_id",
                        {provider, due_by, limit}));
  } else {
    GPUWERK_ASSIGN_OR_RETURN(
        rows, tx.Query(std::string("SELECT ") + kPushColumns +
                           " FROM invoice_pushes p JOIN invoices i ON i.id = p.invoice_id WHERE "
                           "p.provider = ? AND p.pushed_at IS NULL AND i.month = ? "
                           "ORDER BY p.next_attempt_at, p.invoice_id",
                       {provider, month}));
    if (rows.empty()) return std::vector<InvoicePushRow>();
    GPUWERK_ASSIGN_OR_RETURN(
        lines, tx.Query(std::string("SELECT ") + kLineColumns +
                            " FROM invoice_lines l JOIN invoices i ON i.id = l.invoice_id "
                            "JOIN invoice_pushes p ON p.invoice_id = i.id WHERE p.provider = ? "
                            "AND p.pushed_at IS NULL AND i.month = ? "
                            "ORDER BY l.invoice_id, l.session_id",
                        {provider, month}));
  }
  std::vector<InvoicePushRow> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(PushFromRow(r));
  AttachToPushes(out, lines);
  return out;
}

core::Result<std::optional<InvoicePushRow>> InvoiceTable::PushOf(store::Transaction& tx,
                                                                 const std::string& invoice_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne(std::string("SELECT ") + kPushColumns +
                                " FROM invoice_pushes p JOIN invoices i ON i.id = p.invoice_id "
                                "WHERE p.invoice_id = ?",
                            {invoice_id}));
  if (!row) return std::optional<InvoicePushRow>();
  return std::optional<InvoicePushRow>(PushFromRow(*row));
}

core::Result<int64_t> InvoiceTable::PushedCount(store::Transaction& tx, const std::string& provider,
                                                const std::string& month) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM invoice_pushes p JOIN invoices i ON i.id = "
                            "p.invoice_id WHERE p.provider = ? AND p.pushed_at IS NOT NULL AND "
                            "i.month = ?",
                            {provider, month}));
  return row ? row->Int("n") : 0;
}

core::Result<bool> InvoiceTable::RecordPushDone(store::Transaction& tx,
                                                const std::string& invoice_id,
                                                const std::string& provider_ref, int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n, tx.Exec("UPDATE invoice_pushes SET attempts = attempts + 1, provider_ref = ?, "
                         "pushed_at = ? WHERE invoice_id = ? AND pushed_at IS NULL",
                         {provider_ref, now, invoice_id}));
  return n > 0;
}

core::Result<bool> InvoiceTable::RecordPushFailed(store::Transaction& tx,
                                                  const std::string& invoice_id,
                                                  const std::string& code,
                                                  const std::string& message,
                                                  int64_t next_attempt_at) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t n,
      tx.Exec("UPDATE invoice_pushes SET attempts = attempts + 1, last_error_code = ?, "
              "last_error = ?, next_attempt_at = ? WHERE invoice_id = ? AND pushed_at IS NULL",
              {core::BoundedPrintable(code, 64), core::BoundedPrintable(message, kPushErrorBytes),
               next_attempt_at, invoice_id}));
  return n > 0;
}

}  // namespace gpuwerk::billing
