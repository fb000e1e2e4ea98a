// Relay session records in a real SQLite store: idempotent start and end, closing a
// restarted relay's open rows, paging newest first, filters, audit events.
#include "access/relay_session_records.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "store/sqlite_database.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::access {
namespace {

using store::Migrate;
using store::SqliteDatabase;
using store::Transaction;

class RelaySessionRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(db_.Open());
    ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
      for (const auto& [id, email] :
           {std::pair<std::string, std::string>{"per_a", "a@x.test"}, {"per_b", "b@x.test"}}) {
        GPUWERK_TRY(
            tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?,?,?,?)",
                    {id, email, email, int64_t{1}}));
      }
      return {};
    }));
  }
  void TearDown() override { db_.reset(); }

  static RelaySessionRow Rec(const std::string& id, int64_t started,
                             const std::string& instance = "ins_1",
                             const std::string& person = "per_a",
                             const std::string& relay = "edge-1") {
    RelaySessionRow r;
    r.id = id;
    r.relay = relay;
    r.person_id = person;
    r.key_fingerprint = "SHA256:abc";
    r.instance_id = instance;
    r.hostname = "alpha-aaaaa";
    r.login = "root";
    r.source_address = "203.0.113.7";
    r.started_at = started;
    return r;
  }
  core::Result<bool> Start(const RelaySessionRow& r) {
    return db_->Write(
        [&](Transaction& tx) { return RecordRelaySessionStart(tx, clock_, rng_, r); });
  }
  core::Result<bool> End(const RelaySessionRow& r) {
    return db_->Write([&](Transaction& tx) { return RecordRelaySessionEnd(tx, clock_, rng_, r); });
  }
  RelaySessionPage List(const RelaySessionFilter& f, int page) {
    auto p = db_->Read([&](Transaction& tx) { return ListRelaySessions(tx, f, page); });
    EXPECT_TRUE(p) << p.error().message;
    return p ? *p : RelaySessionPage{};
  }
  int64_t Audits(const std::string& action) {
    auto n = db_->Read([&](Transaction& tx) -> core::Result<int64_t> {
      GPUWERK_ASSIGN_OR_RETURN(
          auto row, tx.QueryOne("SELECT COUNT(*) FROM audit_events WHERE action = ?", {action}));
      return row->Int(0);
    });
    return n ? *n : -1;
  }

  testing::TempDatabase db_;
  core::FakeClock clock_;
  core::SodiumRng rng_;
};

TEST_F(RelaySessionRecordsTest, StartAndEndAreIdempotentAndTheFirstEndIsFinal) {
  auto r = Rec("rls_1", 1000);
  ASSERT_EQ(Start(r).value(), true);
  ASSERT_EQ(Start(r).value(), false);  // a retried report: no second row, no second audit
  auto page = List({}, 1);
  ASSERT_EQ(page.total, 1);
  EXPECT_FALSE(page.items[0].ended_at.has_value());
  EXPECT_EQ(page.items[0].person_email, "a@x.test");
  EXPECT_EQ(page.items[0].end_reason, "");

  r.ended_at = 1090;
  r.bytes_from_client = 12;
  r.bytes_to_client = 3456;
  r.end_reason = "client closed";
  ASSERT_EQ(End(r).value(), true);
  auto late = r;
  late.ended_at = 2000;
  late.bytes_to_client = 1;
  late.end_reason = "relay stopping";
  ASSERT_EQ(End(late).value(), false);
  page = List({}, 1);
  ASSERT_EQ(page.total, 1);
  EXPECT_EQ(page.items[0].ended_at, 1090);
  EXPECT_EQ(page.items[0].bytes_from_client, 12);
  EXPECT_EQ(page.items[0].bytes_to_client, 3456);
  EXPECT_EQ(page.items[0].end_reason, "client closed");
  // A start after the end changes nothing either.
  ASSERT_EQ(Start(Rec("rls_1", 1000)).value(), false);
  EXPECT_EQ(List({}, 1).items[0].ended_at, 1090);
  EXPECT_EQ(Audits("relay_session.start"), 1);
  EXPECT_EQ(Audits("relay_session.end"), 1);
}

TEST_F(RelaySessionRecordsTest, AnEndWhoseStartWasLostIsRecordedWhole) {
  auto r = Rec("rls_2", 500);
  r.ended_at = 560;
  r.bytes_from_client = 7;
  r.end_reason = "instance closed";
  ASSERT_EQ(End(r).value(), true);
  auto page = List({}, 1);
  ASSERT_EQ(page.total, 1);
  EXPECT_EQ(page.items[0].started_at, 500);
  EXPECT_EQ(page.items[0].ended_at, 560);
  EXPECT_EQ(page.items[0].hostname, "alpha-aaaaa");
}

TEST_F(RelaySessionRecordsTest, BadRecordsAndAnotherRelaysIdAreRefused) {
  auto no_id = Rec("", 1);
  EXPECT_EQ(Start(no_id).error().api_code, "invalid_relay_session");
  auto no_end = Rec("rls_3", 1);
  EXPECT_EQ(End(no_end).error().api_code, "invalid_relay_session");
  ASSERT_TRUE(Start(Rec("rls_3", 1)));
  auto other = Rec("rls_3", 1, "ins_1", "per_a", "edge-2");
  EXPECT_EQ(Start(other).error().api_code, "relay_session_conflict");
  other.ended_at = 5;
  EXPECT_EQ(End(other).error().api_code, "relay_session_conflict");
  EXPECT_FALSE(List({}, 1).items[0].ended_at.has_value());
  EXPECT_EQ(List({}, 1).items[0].relay, "edge-1");
}

TEST_F(RelaySessionRecordsTest, ClosingARestartedRelaysRowsTouchesOnlyItsOpenOnes) {
  ASSERT_TRUE(Start(Rec("rls_a", 100)));
  ASSERT_TRUE(Start(Rec("rls_b", 100)));
  auto ended = Rec("rls_c", 100);
  ended.ended_at = 150;
  ended.end_reason = "client closed";
  ASSERT_TRUE(End(ended));
  ASSERT_TRUE(Start(Rec("rls_d", 100, "ins_1", "per_a", "local")));
  auto closed = db_->Write(
      [&](Transaction& tx) { return CloseOpenRelaySessions(tx, clock_, rng_, "edge-1", 300); });
  ASSERT_TRUE(closed);
  EXPECT_EQ(*closed, 2);
  for (const auto& row : List({}, 1).items) {
    if (row.id == "rls_a" || row.id == "rls_b") {
      EXPECT_EQ(row.ended_at, 300);
      EXPECT_EQ(row.end_reason, kRelayRestartedReason);
    } else if (row.id == "rls_c") {
      EXPECT_EQ(row.ended_at, 150);
      EXPECT_EQ(row.end_reason, "client closed");
    } else {
      EXPECT_FALSE(row.ended_at.has_value()) << row.id;  // another relay's row
    }
  }
  EXPECT_EQ(Audits("relay.restarted"), 1);
  // Nothing left open: nothing closed, nothing audited.
  closed = db_->Write(
      [&](Transaction& tx) { return CloseOpenRelaySessions(tx, clock_, rng_, "edge-1", 400); });
  EXPECT_EQ(closed.value(), 0);
  EXPECT_EQ(Audits("relay.restarted"), 1);
}

TEST_F(RelaySessionRecordsTest, PagesAreNewestFirstInAStableOrderAndFilter) {
  // 20 rows for ins_1 (per_a), 5 for ins_2 (per_b), several in the same second.
  for (int i = 0; i < 20; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "rls_a%02d", i);
    ASSERT_TRUE(Start(Rec(id, 1000 + i / 3)));
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Start(Rec("rls_b" + std::to_string(i), 2000 + i, "ins_2", "per_b")));
  }
  auto all1 = List({}, 1);
  EXPECT_EQ(all1.total, 25);
  EXPECT_EQ(all1.pages, 2);
  ASSERT_EQ(all1.items.size(), 15u);
  EXPECT_EQ(all1.items[0].id, "rls_b4");
  auto all2 = List({}, 2);
  ASSERT_EQ(all2.items.size(), 10u);
  // Every row once, ordered by (started_at, id) descending across the pages.
  std::vector<RelaySessionRow> rows = all1.items;
  rows.insert(rows.end(), all2.items.begin(), all2.items.end());
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& a = rows[i - 1];
    const auto& b = rows[i];
    EXPECT_TRUE(a.started_at > b.started_at || (a.started_at == b.started_at && a.id > b.id))
        << a.id << " before " << b.id;
  }
  EXPECT_TRUE(List({}, 3).items.empty());
  EXPECT_EQ(List({}, 3).total, 25);

  auto ins2 = List({.instance_id = "ins_2"}, 1);
  EXPECT_EQ(ins2.total, 5);
  EXPECT_EQ(ins2.pages, 1);
  for (const auto& row : ins2.items) EXPECT_EQ(row.person_email, "b@x.test");
  EXPECT_EQ(List({.person_id = "per_a"}, 1).total, 20);
  EXPECT_EQ(List({.person_id = "per_a"}, 2).items.size(), 5u);
  EXPECT_EQ(List({.instance_id = "ins_2", .person_id = "per_a"}, 1).total, 0);
  EXPECT_EQ(List({.instance_id = "ins_none"}, 1).pages, 1);
  auto bad = db_->Read([&](Transaction& tx) { return ListRelaySessions(tx, {}, 0); });
  EXPECT_EQ(bad.error().api_code, "invalid_page");
}

}  // namespace
}  // namespace gpuwerk::access
