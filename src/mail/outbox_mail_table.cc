#include "mail/outbox_mail_table.h"

namespace gpuwerk::mail {
namespace {

constexpr const char* kColumns =
    "id, to_address, subject, text_body, html_body, created_at, attempts, next_attempt_at, "
    "sent_at, last_error";

OutboxMail MailFromRow(const store::Row& r) {
  return OutboxMail{.id = r.Text("id"),
                    .mail = Mail{.to = r.Text("to_address"),
                                 .subject = r.Text("subject"),
                                 .text_body = r.Text("text_body"),
                                 .html_body = r.Text("html_body")},
                    .created_at = r.Int("created_at"),
                    .attempts = r.Int("attempts"),
                    .next_attempt_at = r.Int("next_attempt_at"),
                    .sent_at = r.OptInt("sent_at"),
                    .last_error = r.OptText("last_error")};
}

}  // namespace

core::Result<void> OutboxMailTable::Insert(store::Transaction& tx, const std::string& id,
                                           const Mail& mail, int64_t now) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO outbox_mails (id, to_address, subject, text_body, html_body, created_at, "
      "attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
      {id, mail.to, mail.subject, mail.text_body, mail.html_body, now, now}));
  return {};
}

core::Result<std::optional<OutboxMail>> OutboxMailTable::Find(store::Transaction& tx,
                                                              const std::string& id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row,
      tx.QueryOne(std::string("SELECT ") + kColumns + " FROM outbox_mails WHERE id = ?", {id}));
  if (!row) return std::optional<OutboxMail>();
  return std::optional<OutboxMail>(MailFromRow(*row));
}

core::Result<std::vector<OutboxMail>> OutboxMailTable::ListDue(store::Transaction& tx, int64_t now,
                                                               int64_t max_attempts,
                                                               int64_t limit) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto rows, tx.Query(std::string("SELECT ") + kColumns +
                              " FROM outbox_mails WHERE sent_at IS NULL AND next_attempt_at <= ? "
                              "AND attempts < ? ORDER BY created_at, id LIMIT ?",
                          {now, max_attempts, limit}));
  std::vector<OutboxMail> out;
  out.reserve(rows.size());
  for (const store::Row& r : rows) out.push_back(MailFromRow(r));
  return out;
}

core::Result<bool> OutboxMailTable::Claim(store::Transaction& tx, const OutboxMail& seen,
                                          int64_t lease_until) {
  GPUWERK_ASSIGN_OR_RETURN(
      int64_t changed,
      tx.Exec("UPDATE outbox_mails SET next_attempt_at = ? WHERE id = ? AND next_attempt_at = ? "
              "AND attempts = ? AND sent_at IS NULL",
              {lease_until, seen.id, seen.next_attempt_at, seen.attempts}));
  return changed == 1;
}

core::Result<void> OutboxMailTable::MarkSent(store::Transaction& tx, const std::string& id,
                                             int64_t sent_at) {
  GPUWERK_TRY(tx.Exec(
      "UPDATE outbox_mails SET sent_at = ?, last_error = NULL WHERE id = ? AND sent_at IS NULL",
      {sent_at, id}));
  return {};
}

core::Result<void> OutboxMailTable::RecordFailure(store::Transaction& tx, const std::string& id,
                                                  int64_t attempts, const std::string& last_error,
                                                  int64_t next_attempt_at) {
  GPUWERK_TRY(
      tx.Exec("UPDATE outbox_mails SET attempts = ?, last_error = ?, next_attempt_at = ? "
              "WHERE id = ? AND sent_at IS NULL",
              {attempts, last_error, next_attempt_at, id}));
  return {};
}

core::Result<int64_t> OutboxMailTable::CountSent(store::Transaction& tx) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM outbox_mails WHERE sent_at IS NOT NULL"));
  return row->Int("n");
}

}  // namespace gpuwerk::mail
