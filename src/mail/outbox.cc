#include "mail/outbox.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "mail/message.h"
#include "mail/outbox_mail_table.h"

namespace gpuwerk::mail {
namespace {

constexpr size_t kMaxLastErrorBytes = 500;

/// `message` cut to kMaxLastErrorBytes without splitting a UTF-8 sequence.
std::string LastError(const core::Error& error) {
  std::string text = error.api_code + ": " + error.message;
  if (text.size() <= kMaxLastErrorBytes) return text;
  size_t cut = kMaxLastErrorBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  text.resize(cut);
  return text;
}

}  // namespace

Outbox::Outbox(store::Database& db, const core::Clock& clock, core::Rng& rng)
    : db_(db), clock_(clock), rng_(rng) {}

core::Result<std::string> Outbox::Enqueue(store::Transaction& tx, const Mail& mail) {
  GPUWERK_TRY(ValidateMail(mail));
  std::string id = core::NewId(rng_, "mail");
  GPUWERK_TRY(OutboxMailTable::Insert(tx, id, mail, clock_.NowUnix()));
  return id;
}

core::Result<std::string> Outbox::Enqueue(const Mail& mail) {
  return db_.Write([&](store::Transaction& tx) { return Enqueue(tx, mail); });
}

OutboxWorker::OutboxWorker(store::Database& db, Mailer& mailer, const core::Clock& clock,
                           Options options)
    : db_(db), mailer_(mailer), clock_(clock), options_(std::move(options)) {}

OutboxWorker::~OutboxWorker() { Stop(); }

std::chrono::seconds OutboxWorker::Backoff(const Options& options, int attempts) {
  std::chrono::seconds wait = options.backoff_base;
  for (int i = 1; i < attempts && wait < options.backoff_cap; ++i) wait *= 2;
  return std::min(wait, options.backoff_cap);
}

void OutboxWorker::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  wake_ = false;
  thread_ = std::thread([this] { Run(); });
}

void OutboxWorker::Stop() {
  std::thread thread;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

void OutboxWorker::Wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void OutboxWorker::Run() {
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      wake_ = false;
    }
    auto pass = Pass(/*from_thread=*/true);
    if (!pass) {
      spdlog::warn("outbox: delivery pass failed: {}", pass.error().message);
    }
    std::unique_lock lock(mu_);
    if (pass && pass->seen >= options_.batch_size) continue;  // more may be due: go on at once
    cv_.wait_for(lock, options_.poll_interval, [this] { return stop_.load() || wake_; });
  }
}

core::Result<int> OutboxWorker::DeliverDue() {
  GPUWERK_ASSIGN_OR_RETURN(PassResult pass, Pass(/*from_thread=*/false));
  return pass.sent;
}

core::Result<OutboxWorker::PassResult> OutboxWorker::Pass(bool from_thread) {
  if (options_.fence != nullptr && !options_.fence->Holding()) return PassResult{};
  const int64_t now = clock_.NowUnix();
  GPUWERK_ASSIGN_OR_RETURN(std::vector<OutboxMail> due, db_.Read([&](store::Transaction& tx) {
    return OutboxMailTable::ListDue(tx, now, options_.max_attempts, options_.batch_size);
  }));

  PassResult result;
  result.seen = static_cast<int>(due.size());
  for (const OutboxMail& row : due) {
    if (from_thread && stop_) break;
    const std::string& id = row.id;
    const int64_t seen_attempts = row.attempts;

    // Claim: compare-and-set on what we saw, so exactly one worker wins the mail.
    const int64_t lease_until = clock_.NowUnix() + options_.lease.count();
    GPUWERK_ASSIGN_OR_RETURN(bool claimed,
                             db_.Write([&](store::Transaction& tx) -> core::Result<bool> {
                               if (options_.fence != nullptr)
                                 GPUWERK_TRY(options_.fence->Check(tx));
                               return OutboxMailTable::Claim(tx, row, lease_until);
                             }));
    if (!claimed) continue;  // another worker has it, or sent it already

    // One Message-ID for every attempt at this mail (at-least-once: see mail.h).
    mail::Mail mail = row.mail;
    mail.message_id = id;
    const core::Result<void> sent = mailer_.Send(mail);
    const int64_t done_at = clock_.NowUnix();

    if (sent) {
      GPUWERK_TRY(db_.Write(
          [&](store::Transaction& tx) { return OutboxMailTable::MarkSent(tx, id, done_at); }));
      ++result.sent;
      ++sent_total_;
      spdlog::info("outbox: sent mail id={} attempt={}", id, seen_attempts + 1);
      continue;
    }

    ++failed_attempts_total_;
    const bool permanent = sent.error().code == core::ErrorCode::kInvalidArgument;
    const int64_t attempts =
        permanent ? std::max<int64_t>(options_.max_attempts, seen_attempts + 1) : seen_attempts + 1;
    const int64_t next_attempt_at =
        done_at + Backoff(options_, static_cast<int>(std::min<int64_t>(attempts, 1000))).count();
    const std::string last_error = LastError(sent.error());
    GPUWERK_TRY(db_.Write([&](store::Transaction& tx) {
      return OutboxMailTable::RecordFailure(tx, id, attempts, last_error, next_attempt_at);
    }));
    if (attempts >= options_.max_attempts) {
      ++given_up_total_;
      spdlog::error("outbox: gave up on mail id={} after {} attempt(s): {}", id, seen_attempts + 1,
                    last_error);
    } else {
      spdlog::warn("outbox: mail id={} attempt {} failed, next in {} s: {}", id, attempts,
                   next_attempt_at - done_at, last_error);
    }
  }
  return result;
}

}  // namespace gpuwerk::mail
