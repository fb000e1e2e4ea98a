#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "mail/mail.h"
#include "store/database.h"

namespace gpuwerk::mail {

/// One row of `outbox_mails`: a mail and its delivery state. Times are Unix seconds.
struct OutboxMail {
  std::string id;  ///< "mail_…"
  Mail mail;
  int64_t created_at = 0;
  int64_t attempts = 0;         ///< failed attempts so far (max_attempts when given up for good)
  int64_t next_attempt_at = 0;  ///< due from then on (or the end of a claim's lease)
  std::optional<int64_t> sent_at;
  std::optional<std::string> last_error;  ///< "api_code: message" of the last failed attempt
};

/// The `outbox_mails` table (migration 1): the one place that holds its SQL (Outbox and
/// OutboxWorker call it). Rows map to OutboxMail in one place and are read by column name.
/// Every function works inside the caller's transaction; errors are the store's. Stateless.
class OutboxMailTable {
 public:
  OutboxMailTable() = delete;

  /// Stores `mail` as `id`, created and due at `now`, with no attempts.
  static core::Result<void> Insert(store::Transaction& tx, const std::string& id, const Mail& mail,
                                   int64_t now);
  /// Mail `id`; nullopt when absent.
  static core::Result<std::optional<OutboxMail>> Find(store::Transaction& tx,
                                                      const std::string& id);
  /// Up to `limit` unsent mails due at `now` (next_attempt_at ≤ now) with fewer than
  /// `max_attempts` attempts, oldest first.
  static core::Result<std::vector<OutboxMail>> ListDue(store::Transaction& tx, int64_t now,
                                                       int64_t max_attempts, int64_t limit);
  /// Claims `seen` for one worker: moves its next_attempt_at to `lease_until` if it is still
  /// unsent with the attempts and next_attempt_at that were read (compare-and-set). True when this
  /// call claimed it; false when another worker did, or it was sent meanwhile.
  static core::Result<bool> Claim(store::Transaction& tx, const OutboxMail& seen,
                                  int64_t lease_until);
  /// Records mail `id` as sent at `sent_at` (clears last_error); no-op when it was sent already.
  static core::Result<void> MarkSent(store::Transaction& tx, const std::string& id,
                                     int64_t sent_at);
  /// Records a failed attempt of unsent mail `id`: its attempts count, the error, and when it is
  /// due again.
  static core::Result<void> RecordFailure(store::Transaction& tx, const std::string& id,
                                          int64_t attempts, const std::string& last_error,
                                          int64_t next_attempt_at);
  /// How many mails have been sent.
  static core::Result<int64_t> CountSent(store::Transaction& tx);
};

}  // namespace gpuwerk::mail
