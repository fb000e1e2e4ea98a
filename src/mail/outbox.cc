#include "mail/outbox.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "mail/message.h"

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
  const int64_t now = clock_.NowUnix();
  GPUWERK_TRY(tx.Exec(
      "INSERT INTO outbox_mails (id, to_address, subject, text_body, html_body, created_at, "
      "attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
      {id, mail.to, mail.subject, mail.text_body, mail.html_body, now, now}));
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
  const int64_t now = clock_.NowUnix();
  GPUWERK_ASSIGN_OR_RETURN(std::vector<store::Row> due, db_.Read([&](store::Transaction& tx) {
    return tx.Query(
        "SELECT id, to_address, subject, text_body, html_body, attempts, next_attempt_at "
        "FROM outbox_mails WHERE sent_at IS NULL AND next_attempt_at <= ? AND attempts < ? "
        "ORDER BY created_at, id LIMIT ?",
        {now, int64_t{options_.max_attempts}, int64_t{options_.batch_size}});
  }));

  PassResult result;
  result.seen = static_cast<int>(due.size());
  for (const store::Row& row : due) {
    if (from_thread && stop_) break;
    const std::string id = row.Text(0);
    const int64_t seen_attempts = row.Int(5);
    const int64_t seen_next_attempt_at = row.Int(6);

    // Claim: compare-and-set on what we saw, so exactly one worker wins the mail.
    const int64_t lease_until = clock_.NowUnix() + options_.lease.count();
    GPUWERK_ASSIGN_OR_RETURN(int64_t claimed, db_.Write([&](store::Transaction& tx) {
      return tx.Exec(
          "UPDATE outbox_mails SET next_attempt_at = ? WHERE id = ? AND next_attempt_at = ? "
          "AND attempts = ? AND sent_at IS NULL",
          {lease_until, id, seen_next_attempt_at, seen_attempts});
    }));
    if (claimed != 1) continue;  // another worker has it, or sent it already

    const Mail mail{.to = row.Text(1),
                    .subject = row.Text(2),
                    .text_body = row.Text(3),
                    .html_body = row.Text(4)};
    const core::Result<void> sent = mailer_.Send(mail);
    const int64_t done_at = clock_.NowUnix();

    if (sent) {
      GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
        GPUWERK_TRY(tx.Exec(
            "UPDATE outbox_mails SET sent_at = ?, last_error = NULL WHERE id = ? AND sent_at IS "
            "NULL",
            {done_at, id}));
        return {};
      }));
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
    GPUWERK_TRY(db_.Write([&](store::Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(
          tx.Exec("UPDATE outbox_mails SET attempts = ?, last_error = ?, next_attempt_at = ? "
                  "WHERE id = ? AND sent_at IS NULL",
                  {attempts, last_error, next_attempt_at, id}));
      return {};
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
