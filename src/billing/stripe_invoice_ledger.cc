#include "billing/stripe_invoice_ledger.h"

namespace gpuwerk::billing {

core::Result<StripeInvoiceRequest> StripeInvoiceLedger::Prepare(store::Transaction& tx,
                                                                const StripeInvoiceRequest& fresh,
                                                                int64_t now) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT idempotency_key, invoice_id, path, body, answer_id, created_at "
                            "FROM stripe_invoice_requests WHERE idempotency_key = ?",
                            {fresh.idempotency_key}));
  if (row) {
    return StripeInvoiceRequest{.idempotency_key = row->Text("idempotency_key"),
                                .invoice_id = row->Text("invoice_id"),
                                .path = row->Text("path"),
                                .body = row->Text("body"),
                                .answer_id = row->Text("answer_id"),
                                .created_at = row->Int("created_at")};
  }
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO stripe_invoice_requests (idempotency_key, invoice_id, path, body, created_at) "
      "VALUES (?, ?, ?, ?, ?)",
      {fresh.idempotency_key, fresh.invoice_id, fresh.path, fresh.body, now}));
  StripeInvoiceRequest stored = fresh;
  stored.answer_id.clear();
  stored.created_at = now;
  return stored;
}

core::Result<void> StripeInvoiceLedger::Answered(store::Transaction& tx, const std::string& key,
                                                 const std::string& answer_id, int64_t now) {
  GPUWERK_TRY(
      tx.Exec("UPDATE stripe_invoice_requests SET answer_id = ?, answered_at = ? WHERE "
              "idempotency_key = ?",
              {answer_id, now, key}));
  return {};
}

core::Result<std::optional<PushedInvoice>> StripeInvoiceLedger::Pushed(
    store::Transaction& tx, const std::string& invoice_id) {
  GPUWERK_ASSIGN_OR_RETURN(
      auto row, tx.QueryOne("SELECT provider_ref, status FROM stripe_invoice_pushes WHERE "
                            "invoice_id = ?",
                            {invoice_id}));
  if (!row) return std::optional<PushedInvoice>();
  return std::optional<PushedInvoice>(
      PushedInvoice{.provider_ref = row->Text("provider_ref"), .status = row->Text("status")});
}

core::Result<void> StripeInvoiceLedger::RecordPushed(store::Transaction& tx,
                                                     const std::string& invoice_id,
                                                     const PushedInvoice& pushed, int64_t now) {
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO stripe_invoice_pushes (invoice_id, provider_ref, status, pushed_at) VALUES "
      "(?, ?, ?, ?) ON CONFLICT(invoice_id) DO NOTHING",
      {invoice_id, pushed.provider_ref, pushed.status, now}));
  return {};
}

}  // namespace gpuwerk::billing
