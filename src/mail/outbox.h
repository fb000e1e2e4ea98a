#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "core/random.h"
#include "mail/mail.h"
#include "mail/mailer.h"
#include "store/database.h"
#include "store/leader_fence.h"

namespace gpuwerk::mail {

/// The outbox: mails are stored in the `outbox_mails` table first, in the same transaction as
/// the change that causes them (a magic link, an invite, a queue launch), and an OutboxWorker
/// sends them afterwards with retries. So a mail is never sent for a change that rolled back,
/// and never lost for one that committed. Thread-safe (holds no state of its own).
class Outbox {
 public:
  /// The references must outlive the Outbox. `clock` stamps created_at; `rng` makes ids.
  Outbox(store::Database& db, const core::Clock& clock, core::Rng& rng);

  /// Stores `mail` as due now inside the caller's transaction `tx`, so it is committed or rolled
  /// back with the caller's change. Returns the new mail's id ("mail_…"). Call
  /// OutboxWorker::Wake() after the transaction commits to send it without waiting for the poll.
  /// Errors: kInvalidArgument "invalid_mail" (ValidateMail); the store's errors.
  core::Result<std::string> Enqueue(store::Transaction& tx, const Mail& mail);

  /// Enqueue in a write transaction of its own (for mails that go with no other change).
  core::Result<std::string> Enqueue(const Mail& mail);

 private:
  store::Database& db_;
  const core::Clock& clock_;
  core::Rng& rng_;
};

/// Configuration of OutboxWorker.
struct OutboxWorkerOptions {
  /// How long the background thread waits between passes when not woken (real time).
  std::chrono::milliseconds poll_interval{1000};
  /// Attempts after which a mail is given up (kept, unsent, with its last error).
  int max_attempts = 20;
  /// Wait after the first failed attempt; doubles with each further failure up to backoff_cap.
  std::chrono::seconds backoff_base{5};
  std::chrono::seconds backoff_cap{3600};
  /// How long a claimed mail is reserved for the worker sending it. Must exceed the Mailer's
  /// timeout; after it the mail is due again (a worker that crashed mid-send is retried).
  std::chrono::seconds lease{300};
  /// Mails claimed per pass at most.
  int batch_size = 20;
  /// Sending is leader-only when set (docs/scale-out.md "Leader-only work"): a pass does nothing
  /// while the fence is not Holding(), and each claim checks it in the claim's transaction (a
  /// replica that lost the lease claims nothing more; a mail it claimed before is finished). Null
  /// (SQLite, tests): every pass runs. Must outlive the worker.
  const store::LeaderFence* fence = nullptr;
};

/// Sends due outbox mails through a Mailer, with exponential back-off, across any number of
/// workers (server replicas) sharing one database.
///
/// A mail is due when `sent_at IS NULL AND next_attempt_at <= now AND attempts < max_attempts`.
/// Each pass reads up to batch_size due mails, oldest first, and for each one:
/// 1. claims it with a compare-and-set in its own short transaction (OutboxMailTable::Claim: sets
///    next_attempt_at = now + lease where next_attempt_at and attempts are still what was read and
///    it is unsent); only the worker whose update changed the row sends it, so two workers never
///    send the same mail (unless a lease expires mid-send: at-least-once);
/// 2. sends it outside any transaction;
/// 3. on success sets `sent_at`; on failure increments `attempts`, stores the error message as
///    `last_error` and sets `next_attempt_at = now + Backoff(attempts)`. A permanent refusal
///    (any kInvalidArgument, e.g. "mail_rejected") sets attempts to max_attempts: never retried.
///
/// Times come from the injected Clock (Unix seconds, as the store keeps them); only the
/// background thread's wait uses real time. Thread-safe: DeliverDue, Wake, Start, Stop and the
/// counters may be called from any thread.
class OutboxWorker {
 public:
  using Options = OutboxWorkerOptions;

  /// The references must outlive the worker.
  OutboxWorker(store::Database& db, Mailer& mailer, const core::Clock& clock, Options options = {});
  /// Stops the thread (see Stop).
  ~OutboxWorker();
  OutboxWorker(const OutboxWorker&) = delete;
  OutboxWorker& operator=(const OutboxWorker&) = delete;

  /// Starts the background thread: a pass now, then one per poll_interval or Wake(); a full
  /// batch is followed by another pass at once. Errors of a pass are logged. No-op if running.
  void Start();
  /// Stops and joins the thread; idempotent. Interrupts the wait at once, but a Send in progress
  /// is finished first (at most the Mailer's timeout); the rest of that batch is left for later.
  void Stop();
  /// Makes the background thread start a pass now (after an Enqueue committed). Never blocks.
  void Wake();

  /// One pass, synchronously (see the class comment). Returns how many mails were sent. Errors:
  /// the store's (the pass stops there; mails already sent are recorded).
  core::Result<int> DeliverDue();

  /// The wait after the `attempts`-th failed attempt (attempts ≥ 1): backoff_base ·
  /// 2^(attempts−1), at most backoff_cap.
  static std::chrono::seconds Backoff(const Options& options, int attempts);

  /// Mails sent since construction (a Prometheus counter).
  int64_t sent_total() const { return sent_total_.load(); }
  /// Failed send attempts since construction.
  int64_t failed_attempts_total() const { return failed_attempts_total_.load(); }
  /// Mails given up since construction (rejected for good, or out of attempts).
  int64_t given_up_total() const { return given_up_total_.load(); }

 private:
  struct PassResult {
    int sent = 0;
    int seen = 0;
  };
  /// One pass; `from_thread`: give up the rest of the batch when Stop() was called.
  core::Result<PassResult> Pass(bool from_thread);
  void Run();

  store::Database& db_;
  Mailer& mailer_;
  const core::Clock& clock_;
  const Options options_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;              // guarded by mu_
  std::atomic<bool> stop_{false};  // written under mu_
  std::thread thread_;             // guarded by mu_

  std::atomic<int64_t> sent_total_{0};
  std::atomic<int64_t> failed_attempts_total_{0};
  std::atomic<int64_t> given_up_total_{0};
};

}  // namespace gpuwerk::mail
