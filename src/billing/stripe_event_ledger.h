#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::billing {

/// The ledger of Stripe webhook events (`stripe_events`, `stripe_event_versions`, migration 19):
/// the one place that holds their SQL. An event id is recorded in the same transaction as its
/// effect, so each event is applied at most once; per aspect (e.g. "card:<billing account>",
/// "invoice:<in_…>") the `created` of the newest event applied is kept, so an older event never
/// undoes a newer state. Every function works inside the caller's transaction; errors are the
/// store's. Stateless.
class StripeEventLedger {
 public:
  StripeEventLedger() = delete;

  /// Whether event `event_id` ("evt_…") was recorded.
  static core::Result<bool> Seen(store::Transaction& tx, const std::string& event_id);
  /// Records event `event_id` of `type` (Stripe's `created`, Unix seconds) at `now`. Errors: a
  /// unique violation when it was recorded already.
  static core::Result<void> Record(store::Transaction& tx, const std::string& event_id,
                                   const std::string& type, int64_t created, int64_t now);
  /// Whether an event created at `created` may change `aspect`: no newer event (strictly larger
  /// `created`; with `wins_ties` false, also an equal one: Stripe's `created` has whole seconds)
  /// changed it before. When it may, `aspect` now remembers `created` and `event_id`.
  static core::Result<bool> Advance(store::Transaction& tx, const std::string& aspect,
                                    int64_t created, const std::string& event_id,
                                    bool wins_ties = true);
};

}  // namespace gpuwerk::billing
