#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "billing/payment_provider.h"
#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// One request of an invoice push as stored before it is sent (`stripe_invoice_requests`).
struct StripeInvoiceRequest {
  std::string idempotency_key;  ///< derived from our ids, e.g. "gpuwerk-invoice-<invoice id>"
  std::string invoice_id;       ///< our invoice id
  std::string path;             ///< e.g. "/v1/invoiceitems"
  std::string body;             ///< the exact form body sent (EncodeStripeForm)
  std::string answer_id;        ///< the id Stripe answered (or a look-up found); "" until then
  int64_t created_at = 0;  ///< unix seconds (our clock) when stored, just before its first send
};

/// The ledger of invoice pushes (`stripe_invoice_requests`, `stripe_invoice_pushes`, migration
/// 20): the one place that holds their SQL. Every function works inside the caller's
/// transaction; errors are the store's. Stateless.
class StripeInvoiceLedger {
 public:
  StripeInvoiceLedger() = delete;

  /// The request stored under `key`, or else `fresh` stored now (at `now`, its created_at) and
  /// returned: the first body stored for a key is the one ever sent.
  static core::Result<StripeInvoiceRequest> Prepare(store::Transaction& tx,
                                                    const StripeInvoiceRequest& fresh, int64_t now);
  /// Records the id Stripe answered for `key` (or the id of the object a look-up found for it).
  static core::Result<void> Answered(store::Transaction& tx, const std::string& key,
                                     const std::string& answer_id, int64_t now);
  /// The push of `invoice_id` when it was done; nullopt when not.
  static core::Result<std::optional<PushedInvoice>> Pushed(store::Transaction& tx,
                                                           const std::string& invoice_id);
  /// Records the push of `invoice_id` as done.
  static core::Result<void> RecordPushed(store::Transaction& tx, const std::string& invoice_id,
                                         const PushedInvoice& pushed, int64_t now);
};

}  // namespace gpuwerk::billing
