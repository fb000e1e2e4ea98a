#include "mail/outbox.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/clock.h"
#include "mail/outbox_mail_table.h"
#include "store/leader_elector.h"
#include "store/sqlite_database.h"
#include "tests/support/temp_database.h"
#include "tests/support/two_replicas.h"

namespace gpuwerk::mail {
namespace {

using std::chrono::seconds;

/// A Mailer that records every call and answers from a script (success when the script is
/// empty). `on_send` runs inside Send, before it answers: tests use it to act mid-send.
class FakeMailer final : public Mailer {
 public:
  core::Result<void> Send(const Mail& mail) override {
    std::function<void(const Mail&)> hook;
    core::Result<void> result;
    {
      std::lock_guard lock(mu_);
      calls_.push_back(mail);
      if (!script_.empty()) {
        result = script_.front();
        script_.pop_front();
      }
      hook = on_send;
    }
    if (hook) hook(mail);
    {
      std::lock_guard lock(mu_);
      if (result) delivered_.push_back(mail);
    }
    cv_.notify_all();
    return result;
  }

  void Script(core::Result<void> result) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(result));
  }
  std::vector<Mail> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<Mail> delivered() {
    std::lock_guard lock(mu_);
    return delivered_;
  }
  /// Waits (real time, at most `limit`) until `n` mails were delivered.
  bool WaitDelivered(size_t n, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return delivered_.size() >= n; });
  }

  std::function<void(const Mail&)> on_send;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<core::Result<void>> script_;
  std::vector<Mail> calls_;
  std::vector<Mail> delivered_;
};

/// A deterministic Rng: a counter, so ids are distinct and reproducible.
class CountingRng final : public core::Rng {
 public:
  void Fill(void* out, size_t n) override {
    std::lock_guard lock(mu_);
    auto* bytes = static_cast<unsigned char*>(out);
    uint64_t v = ++counter_;
    for (size_t i = 0; i < n; ++i) {
      bytes[i] = static_cast<unsigned char>(v & 31);
      v >>= 5;
    }
  }

 private:
  std::mutex mu_;
  uint64_t counter_ = 0;
};

core::Result<void> Unavailable() {
  return core::Fail(core::ErrorCode::kUnavailable, "mail_unavailable",
                    "SMTP delivery failed: connection refused");
}

Mail MailTo(const std::string& to) {
  return Mail{.to = to, .subject = "Hello", .text_body = "text", .html_body = "<p>html</p>"};
}

/// The stored state of one outbox mail.
struct Stored {
  int64_t attempts = 0;
  int64_t next_attempt_at = 0;
  std::optional<int64_t> sent_at;
  std::optional<std::string> last_error;
};

class OutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.Open());
    outbox_ = std::make_unique<Outbox>(*db_, clock_, rng_);
  }
  void TearDown() override {
    outbox_.reset();
    db_.reset();
  }
  std::unique_ptr<store::Database> OpenDb() { return db_.OpenAnother(); }
  std::string Enqueue(const Mail& mail) {
    auto id = outbox_->Enqueue(mail);
    EXPECT_TRUE(id) << id.error().message;
    return id.value_or("");
  }
  Stored Get(const std::string& id) {
    auto row = db_->Read([&](store::Transaction& tx) -> core::Result<Stored> {
      GPUWERK_ASSIGN_OR_RETURN(auto mail, OutboxMailTable::Find(tx, id));
      if (!mail) return core::NotFound("mail");
      return Stored{mail->attempts, mail->next_attempt_at, mail->sent_at, mail->last_error};
    });
    EXPECT_TRUE(row) << row.error().message;
    return row.value_or(Stored{});
  }
  int64_t CountSent() {
    auto n = db_->Read([](store::Transaction& tx) { return OutboxMailTable::CountSent(tx); });
    return n.value_or(-1);
  }
  int Deliver(OutboxWorker& worker) {
    auto sent = worker.DeliverDue();
    EXPECT_TRUE(sent) << sent.error().message;
    return sent.value_or(-1);
  }

  testing::TempDatabase db_;
  core::FakeClock clock_;
  CountingRng rng_;
  std::unique_ptr<Outbox> outbox_;
  FakeMailer mailer_;
};

TEST_F(OutboxTest, EnqueueCommitsAndRollsBackWithTheCallersTransaction) {
  auto rolled_back = db_->Write([&](store::Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(outbox_->Enqueue(tx, MailTo("ada@example.com")));
    return core::Fail(core::ErrorCode::kFailedPrecondition, "nope", "the caller's change failed");
  });
  ASSERT_FALSE(rolled_back);
  auto id = db_->Write([&](store::Transaction& tx) -> core::Result<std::string> {
    return outbox_->Enqueue(tx, MailTo("bob@example.com"));
  });
  ASSERT_TRUE(id);
  EXPECT_TRUE(id->starts_with("mail_")) << *id;

  OutboxWorker worker(*db_, mailer_, clock_);
  EXPECT_EQ(Deliver(worker), 1);
  ASSERT_EQ(mailer_.calls().size(), 1u);
  EXPECT_EQ(mailer_.calls()[0].to, "bob@example.com");
  EXPECT_EQ(mailer_.calls()[0].subject, "Hello");
  EXPECT_EQ(mailer_.calls()[0].text_body, "text");
  EXPECT_EQ(mailer_.calls()[0].html_body, "<p>html</p>");
}

TEST_F(OutboxTest, EnqueueRefusesAnInvalidMail) {
  Mail mail = MailTo("ada@example.com");
  mail.subject = "hi\r\nBcc: victim@example.org";
  auto id = outbox_->Enqueue(mail);
  ASSERT_FALSE(id);
  EXPECT_EQ(id.error().api_code, "invalid_mail");
  OutboxWorker worker(*db_, mailer_, clock_);
  EXPECT_EQ(Deliver(worker), 0);
  EXPECT_TRUE(mailer_.calls().empty());
}

TEST_F(OutboxTest, SendsDueMailsOnceOldestFirst) {
  const std::string first = Enqueue(MailTo("first@example.com"));
  clock_.Advance(seconds(1));
  const std::string second = Enqueue(MailTo("second@example.com"));
  OutboxWorker worker(*db_, mailer_, clock_, {.batch_size = 1});
  EXPECT_EQ(Deliver(worker), 1);
  EXPECT_EQ(Get(first).sent_at, clock_.NowUnix());
  EXPECT_FALSE(Get(second).sent_at);
  EXPECT_EQ(Deliver(worker), 1);
  EXPECT_EQ(Deliver(worker), 0);
  ASSERT_EQ(mailer_.calls().size(), 2u);
  EXPECT_EQ(mailer_.calls()[0].to, "first@example.com");
  EXPECT_EQ(mailer_.calls()[1].to, "second@example.com");
  EXPECT_EQ(worker.sent_total(), 2);
  EXPECT_EQ(worker.failed_attempts_total(), 0);
  EXPECT_EQ(Get(second).attempts, 0);
}

// Sending is leader-only with a fence (docs/scale-out.md): a replica that does not hold the
// lease sends nothing, and one paused past its lease (another took over) has its claim refused in
// the claim's transaction and sends nothing either.
TEST_F(OutboxTest, OnlyTheLeaseHolderSendsAndAPausedOldHoldersClaimIsRefused) {
  gpuwerk::testing::TwoReplicaElectors replicas(*db_);
  store::LeaderElector& a = replicas.a;
  store::LeaderElector& b = replicas.b;
  ASSERT_TRUE(a.Step());
  ASSERT_TRUE(b.Step());
  FakeMailer mailer_b;
  OutboxWorker worker_a(*db_, mailer_, clock_, {.fence = &a});
  OutboxWorker worker_b(*db_, mailer_b, clock_, {.fence = &b});

  Enqueue(MailTo("first@example.com"));
  EXPECT_EQ(Deliver(worker_b), 0);  // not the leader: does nothing
  EXPECT_TRUE(mailer_b.calls().empty());
  EXPECT_EQ(Deliver(worker_a), 1);

  // a pauses (its monotonic clock stands still), its lease runs out, b takes over.
  const std::string second = Enqueue(MailTo("second@example.com"));
  replicas.lease_ms += 10'001;
  ASSERT_TRUE(b.Step());
  ASSERT_TRUE(b.Holding());
  auto refused = worker_a.DeliverDue();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().api_code, "not_leader");
  EXPECT_EQ(mailer_.calls().size(), 1u);
  EXPECT_EQ(Get(second).attempts, 0);
  EXPECT_EQ(Deliver(worker_b), 1);
  ASSERT_EQ(mailer_b.calls().size(), 1u);
  EXPECT_EQ(mailer_b.calls()[0].to, "second@example.com");
}

TEST_F(OutboxTest, RetriesWithExponentialBackoff) {
  const std::string id = Enqueue(MailTo("ada@example.com"));
  for (int i = 0; i < 3; ++i) mailer_.Script(Unavailable());
  OutboxWorker worker(*db_, mailer_, clock_);

  EXPECT_EQ(Deliver(worker), 0);
  Stored s = Get(id);
  EXPECT_EQ(s.attempts, 1);
  EXPECT_EQ(s.next_attempt_at, clock_.NowUnix() + 5);
  EXPECT_EQ(s.last_error, "mail_unavailable: SMTP delivery failed: connection refused");
  EXPECT_FALSE(s.sent_at);

  EXPECT_EQ(Deliver(worker), 0);  // not due yet
  clock_.Advance(seconds(4));
  EXPECT_EQ(Deliver(worker), 0);
  EXPECT_EQ(mailer_.calls().size(), 1u);

  clock_.Advance(seconds(1));
  EXPECT_EQ(Deliver(worker), 0);  // second attempt, fails
  EXPECT_EQ(mailer_.calls().size(), 2u);
  EXPECT_EQ(Get(id).attempts, 2);
  EXPECT_EQ(Get(id).next_attempt_at, clock_.NowUnix() + 10);

  clock_.Advance(seconds(10));
  EXPECT_EQ(Deliver(worker), 0);  // third attempt, fails
  EXPECT_EQ(Get(id).next_attempt_at, clock_.NowUnix() + 20);
  clock_.Advance(seconds(19));
  EXPECT_EQ(Deliver(worker), 0);
  EXPECT_EQ(mailer_.calls().size(), 3u);

  clock_.Advance(seconds(1));
  EXPECT_EQ(Deliver(worker), 1);  // fourth attempt succeeds
  s = Get(id);
  EXPECT_EQ(s.sent_at, clock_.NowUnix());
  EXPECT_FALSE(s.last_error);
  EXPECT_EQ(s.attempts, 3);
  EXPECT_EQ(worker.failed_attempts_total(), 3);
  EXPECT_EQ(worker.sent_total(), 1);
  EXPECT_EQ(worker.given_up_total(), 0);
}

TEST_F(OutboxTest, BackoffDoublesUpToTheCap) {
  const OutboxWorker::Options options;
  EXPECT_EQ(OutboxWorker::Backoff(options, 1), seconds(5));
  EXPECT_EQ(OutboxWorker::Backoff(options, 2), seconds(10));
  EXPECT_EQ(OutboxWorker::Backoff(options, 3), seconds(20));
  EXPECT_EQ(OutboxWorker::Backoff(options, 10), seconds(2560));
  EXPECT_EQ(OutboxWorker::Backoff(options, 11), seconds(3600));
  EXPECT_EQ(OutboxWorker::Backoff(options, 1000000), seconds(3600));
}

TEST_F(OutboxTest, RejectedMailIsNeverRetried) {
  const std::string id = Enqueue(MailTo("nobody@example.com"));
  mailer_.Script(core::Fail(core::ErrorCode::kInvalidArgument, "mail_rejected",
                            "SMTP server rejected the mail: 550 no such user"));
  OutboxWorker worker(*db_, mailer_, clock_);
  EXPECT_EQ(Deliver(worker), 0);
  const Stored s = Get(id);
  EXPECT_EQ(s.attempts, 20);
  EXPECT_EQ(s.last_error, "mail_rejected: SMTP server rejected the mail: 550 no such user");
  EXPECT_EQ(worker.given_up_total(), 1);
  for (int day = 0; day < 3; ++day) {
    clock_.Advance(std::chrono::hours(24));
    EXPECT_EQ(Deliver(worker), 0);
  }
  EXPECT_EQ(mailer_.calls().size(), 1u);
}

TEST_F(OutboxTest, GivesUpAfterMaxAttempts) {
  const std::string id = Enqueue(MailTo("ada@example.com"));
  for (int i = 0; i < 10; ++i) mailer_.Script(Unavailable());
  OutboxWorker worker(*db_, mailer_, clock_, {.max_attempts = 3});
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Deliver(worker), 0);
    clock_.Advance(std::chrono::hours(2));
  }
  EXPECT_EQ(mailer_.calls().size(), 3u);
  EXPECT_EQ(Get(id).attempts, 3);
  EXPECT_FALSE(Get(id).sent_at);
  EXPECT_EQ(worker.failed_attempts_total(), 3);
  EXPECT_EQ(worker.given_up_total(), 1);
}

// Worker A reads the due list, claims the first mail and, while "sending" it, worker B (another
// replica with its own connection pool on the same database) runs a whole pass. B must skip
// A's claimed mail; A must then skip the mails B sent, although they are on A's stale list.
TEST_F(OutboxTest, TwoWorkersNeverSendTheSameMail) {
  for (int i = 0; i < 5; ++i) Enqueue(MailTo("user" + std::to_string(i) + "@example.com"));
  auto db_b = OpenDb();
  FakeMailer mailer_b;
  OutboxWorker worker_a(*db_, mailer_, clock_);
  OutboxWorker worker_b(*db_b, mailer_b, clock_);
  int b_sent = -1;
  mailer_.on_send = [&](const Mail&) {
    if (b_sent < 0) b_sent = Deliver(worker_b);
  };

  EXPECT_EQ(Deliver(worker_a), 1);
  EXPECT_EQ(b_sent, 4);
  ASSERT_EQ(mailer_.calls().size(), 1u);
  EXPECT_EQ(mailer_.calls()[0].to, "user0@example.com");
  std::set<std::string> recipients;
  for (const Mail& m : mailer_.calls()) recipients.insert(m.to);
  for (const Mail& m : mailer_b.calls()) EXPECT_TRUE(recipients.insert(m.to).second) << m.to;
  EXPECT_EQ(recipients.size(), 5u);
  EXPECT_EQ(CountSent(), 5);
}

TEST_F(OutboxTest, TwoWorkersRacingOnThreadsSendEachMailOnce) {
  constexpr int kMails = 60;
  for (int i = 0; i < kMails; ++i) Enqueue(MailTo("user" + std::to_string(i) + "@example.com"));
  auto db_b = OpenDb();
  FakeMailer mailer_b;
  OutboxWorker worker_a(*db_, mailer_, clock_);
  OutboxWorker worker_b(*db_b, mailer_b, clock_);
  const auto drain = [](OutboxWorker& worker) {
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(worker.DeliverDue());
  };
  std::thread a([&] { drain(worker_a); });
  std::thread b([&] { drain(worker_b); });
  a.join();
  b.join();

  std::map<std::string, int> sends;
  for (const Mail& m : mailer_.calls()) ++sends[m.to];
  for (const Mail& m : mailer_b.calls()) ++sends[m.to];
  EXPECT_EQ(sends.size(), static_cast<size_t>(kMails));
  for (const auto& [to, n] : sends) EXPECT_EQ(n, 1) << to;
  EXPECT_EQ(worker_a.sent_total() + worker_b.sent_total(), kMails);
  EXPECT_EQ(CountSent(), kMails);
}

// A worker that dies mid-send leaves its lease behind; once the lease runs out the mail is due
// again (delivery is at-least-once).
TEST_F(OutboxTest, ExpiredLeaseMakesTheMailDueAgain) {
  const std::string id = Enqueue(MailTo("ada@example.com"));
  FakeMailer mailer_b;
  OutboxWorker worker_a(*db_, mailer_, clock_);
  OutboxWorker worker_b(*db_, mailer_b, clock_);
  int during_lease = -1;
  int after_lease = -1;
  mailer_.on_send = [&](const Mail&) {
    during_lease = Deliver(worker_b);
    clock_.Advance(seconds(301));
    after_lease = Deliver(worker_b);
  };
  EXPECT_EQ(Deliver(worker_a), 1);
  EXPECT_EQ(during_lease, 0);
  EXPECT_EQ(after_lease, 1);
  EXPECT_TRUE(Get(id).sent_at);
}

TEST_F(OutboxTest, WakeInterruptsTheWaitAndStopIsQuick) {
  OutboxWorker worker(*db_, mailer_, clock_, {.poll_interval = std::chrono::hours(1)});
  worker.Start();
  worker.Start();  // no-op
  Enqueue(MailTo("ada@example.com"));
  worker.Wake();
  ASSERT_TRUE(mailer_.WaitDelivered(1));
  Enqueue(MailTo("bob@example.com"));
  worker.Wake();
  ASSERT_TRUE(mailer_.WaitDelivered(2));

  const auto start = std::chrono::steady_clock::now();
  worker.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  worker.Stop();  // idempotent
  EXPECT_EQ(worker.sent_total(), 2);

  // It can be started again after a stop.
  Enqueue(MailTo("carol@example.com"));
  worker.Start();
  ASSERT_TRUE(mailer_.WaitDelivered(3));
  worker.Stop();
}

TEST_F(OutboxTest, StopWithoutStartIsFine) {
  OutboxWorker worker(*db_, mailer_, clock_);
  worker.Stop();
  worker.Wake();
  worker.Stop();
}

}  // namespace
}  // namespace gpuwerk::mail
