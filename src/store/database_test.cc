// The store's contract (database.h), on every backend: SQLite, and PostgreSQL on a real server
// (tests/support/postgres_server.h; skipped with the reason when none can be started here).
#include "store/database.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/open_database.h"
#include "store/postgres_database.h"
#include "tests/support/postgres_server.h"
#include "tests/support/temp_database.h"

namespace gpuwerk::store {
namespace {

using testing::TestBackend;

class DatabaseTest : public ::testing::TestWithParam<TestBackend> {
 protected:
  void SetUp() override {
    if (GetParam() == TestBackend::kPostgres) {
      if (auto why = testing::PostgresUnavailable()) GTEST_SKIP() << *why;
    }
    ASSERT_TRUE(db_.Open());
  }
  void TearDown() override { db_.reset(); }
  testing::TempDatabase db_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Backends, DatabaseTest,
                         ::testing::Values(TestBackend::kSqlite, TestBackend::kPostgres),
                         [](const auto& info) { return testing::BackendName(info.param); });

TEST_P(DatabaseTest, MigrateIsIdempotent) {
  ASSERT_TRUE(Migrate(*db_));
  auto v = db_->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT MAX(version) FROM schema_migrations"));
    return row->Int(0);
  });
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, LatestSchemaVersion());
}

TEST_P(DatabaseTest, ErrorRollsBackTheWholeTransaction) {
  auto r = db_->Write([](Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?,?,?,?)",
                        {std::string("p1"), std::string("a@x"), std::string("a@x"), int64_t{1}}));
    // Same normalised email: unique violation.
    GPUWERK_TRY(tx.Exec("INSERT INTO persons (id, email, email_norm, created_at) VALUES (?,?,?,?)",
                        {std::string("p2"), std::string("A@x"), std::string("a@x"), int64_t{1}}));
    return {};
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::ErrorCode::kAlreadyExists);
  auto count = db_->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM persons"));
    return row->Int(0);
  });
  ASSERT_TRUE(count);
  EXPECT_EQ(*count, 0);
}

TEST_P(DatabaseTest, ConstraintViolationsAreTyped) {
  ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript(
        "CREATE TABLE parent (id TEXT PRIMARY KEY);"
        "CREATE TABLE child (id TEXT PRIMARY KEY, parent_id TEXT NOT NULL REFERENCES parent(id));"
        "INSERT INTO parent VALUES ('a');");
  }));
  auto duplicate = db_->Write([](Transaction& tx) -> core::Result<int64_t> {
    return tx.Exec("INSERT INTO parent VALUES ('a')");
  });
  ASSERT_FALSE(duplicate);
  EXPECT_TRUE(IsConstraintViolation(duplicate.error()));
  EXPECT_TRUE(IsUniqueViolation(duplicate.error()));
  EXPECT_FALSE(IsBusy(duplicate.error()));
  EXPECT_EQ(duplicate.error().code, core::ErrorCode::kAlreadyExists);
  EXPECT_EQ(duplicate.error().api_code, "constraint_violation");

  auto orphan = db_->Write([](Transaction& tx) -> core::Result<int64_t> {
    return tx.Exec("INSERT INTO child VALUES ('c', 'missing')");
  });
  ASSERT_FALSE(orphan);
  EXPECT_TRUE(IsConstraintViolation(orphan.error()));
  EXPECT_FALSE(IsUniqueViolation(orphan.error()));
  EXPECT_EQ(orphan.error().code, core::ErrorCode::kFailedPrecondition);
  EXPECT_EQ(orphan.error().api_code, "constraint_violation");

  // A domain error with the same code and label is not the store's.
  core::Error lookalike(core::ErrorCode::kAlreadyExists, "constraint_violation", "not the store");
  EXPECT_FALSE(IsConstraintViolation(lookalike));
}

TEST_P(DatabaseTest, ConcurrentWritersDoNotLoseUpdates) {
  ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript(
        "CREATE TABLE counter (n BIGINT NOT NULL); INSERT INTO counter VALUES (0);");
  }));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto r = db_->Write([](Transaction& tx) -> core::Result<void> {
          GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT n FROM counter"));
          GPUWERK_TRY(tx.Exec("UPDATE counter SET n = ?", {row->Int(0) + 1}));
          return {};
        });
        ASSERT_TRUE(r) << r.error().message;
      }
    });
  }
  for (auto& t : threads) t.join();
  auto n = db_->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT n FROM counter"));
    return row->Int(0);
  });
  EXPECT_EQ(*n, 200);
}

TEST_P(DatabaseTest, NullsAndTypesRoundTrip) {
  auto r = db_->Read([](Transaction& tx) -> core::Result<std::vector<Row>> {
    return tx.Query("SELECT ?, ?, ?", {kNull, int64_t{1} << 40, std::string("x")});
  });
  ASSERT_TRUE(r);
  const Row& row = (*r)[0];
  EXPECT_TRUE(row.IsNull(0));
  EXPECT_EQ(row.OptText(0), std::nullopt);
  EXPECT_EQ(row.Int(1), int64_t{1} << 40);
  EXPECT_EQ(row.Text(2), "x");
}

TEST_P(DatabaseTest, ColumnsAreReadByTheirNames) {
  auto r = db_->Read([](Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto row,
                             tx.QueryOne("SELECT 7 AS seven, 'x' AS text, NULL AS absent"));
    EXPECT_EQ(row->Int("seven"), 7);
    EXPECT_EQ(row->Text("text"), "x");
    EXPECT_TRUE(row->IsNull("absent"));
    EXPECT_EQ(row->OptInt("absent"), std::nullopt);
    EXPECT_EQ(row->Index("text"), 1u);
    EXPECT_THROW(row->Text("missing"), std::out_of_range);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
}

TEST_P(DatabaseTest, ASchemaNewerThanTheBinaryIsRefusedAndLeftAlone) {
  const int64_t newer = LatestSchemaVersion() + 1;
  ASSERT_TRUE(db_->Write([&](Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                        {newer, int64_t{1}}));
    return {};
  }));
  auto version = SchemaVersion(*db_);
  ASSERT_TRUE(version) << version.error().message;
  EXPECT_EQ(*version, newer);
  auto migrated = Migrate(*db_);
  ASSERT_FALSE(migrated);
  EXPECT_EQ(migrated.error().code, core::ErrorCode::kFailedPrecondition);
  EXPECT_EQ(migrated.error().api_code, "schema_too_new");
  EXPECT_NE(migrated.error().message.find(std::to_string(newer)), std::string::npos);
  EXPECT_FALSE(RefuseNewerSchema(*db_));
}

TEST_P(DatabaseTest, AnEmptyDatabaseIsVersionZeroAndStaysEmpty) {
  testing::TempDatabase empty{GetParam()};
  ASSERT_TRUE(empty.Open({}, /*migrate=*/false));
  auto version = SchemaVersion(*empty);
  ASSERT_TRUE(version) << version.error().message;
  EXPECT_EQ(*version, 0);
  EXPECT_EQ(SchemaVersion(*empty).value_or(-1), 0);  // nothing was created
}

TEST_P(DatabaseTest, HandlesMigratingAtOnceApplyEachMigrationOnce) {
  testing::TempDatabase fresh{GetParam()};
  ASSERT_TRUE(fresh.Open({}, /*migrate=*/false));
  std::vector<std::unique_ptr<Database>> handles;
  for (int i = 0; i < 3; ++i) handles.push_back(fresh.OpenAnother());
  std::vector<std::thread> threads;
  std::vector<core::Result<void>> results(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = Migrate(*handles[i]); });
  }
  for (auto& t : threads) t.join();
  for (auto& r : results) EXPECT_TRUE(r) << r.error().message;
  auto count = fresh->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) AS n FROM schema_migrations"));
    return row->Int("n");
  });
  ASSERT_TRUE(count) << count.error().message;
  EXPECT_EQ(*count, LatestSchemaVersion());
}

TEST_P(DatabaseTest, ChangedRowsAreCounted) {
  auto r = db_->Write([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_TRY(tx.ExecScript("CREATE TABLE t (n BIGINT NOT NULL)"));
    for (int64_t i = 0; i < 3; ++i) GPUWERK_TRY(tx.Exec("INSERT INTO t (n) VALUES (?)", {i}));
    return tx.Exec("UPDATE t SET n = n + 10 WHERE n >= ?", {int64_t{1}});
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 2);
}

TEST_P(DatabaseTest, SumsOfIntegersAreIntegersAndPlaceholdersInLiteralsStay) {
  auto r = db_->Write([](Transaction& tx) -> core::Result<void> {
    GPUWERK_TRY(tx.ExecScript("CREATE TABLE t (n BIGINT NOT NULL, s TEXT NOT NULL)"));
    GPUWERK_TRY(tx.Exec("INSERT INTO t (n, s) VALUES (?, '?'), (?, 'it''s ?')",
                        {int64_t{1} << 40, int64_t{2}}));
    GPUWERK_ASSIGN_OR_RETURN(
        auto row, tx.QueryOne("SELECT SUM(n) AS total, COUNT(*) AS rows, MIN(s) AS s FROM t "
                              "WHERE n > ? -- a ? in a comment\n",
                              {int64_t{0}}));
    EXPECT_EQ(row->Int("total"), (int64_t{1} << 40) + 2);
    EXPECT_EQ(row->Int("rows"), 2);
    EXPECT_EQ(row->Text("s"), "?");
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
}

TEST_P(DatabaseTest, AStatementWithTheWrongNumberOfParametersIsAnError) {
  auto r = db_->Read([](Transaction& tx) -> core::Result<std::vector<Row>> {
    return tx.Query("SELECT version FROM schema_migrations WHERE version = ?");
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::ErrorCode::kInternal);
}

TEST(PostgresPlaceholdersTest, RewritesOnlyPlaceholdersOutsideLiteralsIdentifiersAndComments) {
  int n = 0;
  EXPECT_EQ(PostgresPlaceholders("SELECT ? , '?', \"a?\", 'it''s ?', ? /* ? */ -- ?\n?", &n),
            "SELECT $1 , '?', \"a?\", 'it''s ?', $2 /* ? */ -- ?\n$3");
  EXPECT_EQ(n, 3);
  EXPECT_EQ(PostgresPlaceholders("SELECT 1", &n), "SELECT 1");
  EXPECT_EQ(n, 0);
}

TEST(RedactDatabaseUrlTest, HidesThePasswordOnly) {
  EXPECT_EQ(RedactDatabaseUrl("postgresql://gw:s3cret@db.example:5432/gpuwerk?sslmode=require"),
            "postgresql://gw:***@db.example:5432/gpuwerk?sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://db.example/gpuwerk?user=gw&password=s3cret&x=1"),
            "postgresql://db.example/gpuwerk?user=gw&password=***&x=1");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://gw@db.example/gpuwerk"),
            "postgresql://gw@db.example/gpuwerk");
  EXPECT_EQ(DescribeDatabase("", "/data/gpuwerk.db"), "/data/gpuwerk.db");
  EXPECT_TRUE(IsPostgresUrl("postgres://x/y"));
  EXPECT_FALSE(IsPostgresUrl("/var/lib/gpuwerk/gpuwerk.db"));
}

class PostgresDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = testing::PostgresUnavailable()) GTEST_SKIP() << *why;
    ASSERT_TRUE(db_.Open());
  }
  testing::TempDatabase db_{TestBackend::kPostgres};
};

TEST_F(PostgresDatabaseTest, ARowLockHeldPastTheLockTimeoutIsTypedBusy) {
  ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript(
        "CREATE TABLE counter (n BIGINT NOT NULL); INSERT INTO counter VALUES (0)");
  }));
  auto holder = db_->Begin(TxMode::kWrite);
  ASSERT_TRUE(holder) << holder.error().message;
  ASSERT_TRUE((*holder)->Exec("UPDATE counter SET n = n + 1"));
  auto other = db_.OpenAnother({.pool_size = 1, .busy_timeout_ms = 20});
  ASSERT_TRUE(other);
  auto begun = other->Begin(TxMode::kWrite);
  ASSERT_TRUE(begun) << begun.error().message;
  auto updated = (*begun)->Exec("UPDATE counter SET n = n + 1");
  ASSERT_FALSE(updated);
  EXPECT_TRUE(IsBusy(updated.error())) << updated.error().message;
  EXPECT_EQ(updated.error().api_code, "store_busy");
}

TEST_F(PostgresDatabaseTest, AWriteSkewIsASerializationFailureThatRunRetries) {
  // Two transactions each read both rows and write one: only one order of them is serial.
  ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript(
        "CREATE TABLE slots (id BIGINT PRIMARY KEY, taken BIGINT NOT NULL);"
        "INSERT INTO slots VALUES (1, 0), (2, 0)");
  }));
  auto a = db_->Begin(TxMode::kWrite);
  auto b = db_->Begin(TxMode::kWrite);
  ASSERT_TRUE(a && b);
  const char* kFree = "SELECT COUNT(*) AS n FROM slots WHERE taken = 0";
  ASSERT_EQ((*a)->QueryOne(kFree).value()->Int("n"), 2);
  ASSERT_EQ((*b)->QueryOne(kFree).value()->Int("n"), 2);
  ASSERT_TRUE((*a)->Exec("UPDATE slots SET taken = 1 WHERE id = 1"));
  auto second = (*b)->Exec("UPDATE slots SET taken = 1 WHERE id = 2");
  core::Result<void> committed_b =
      second ? (*b)->Commit() : core::Result<void>(std::unexpected(second.error()));
  auto committed_a = (*a)->Commit();
  // One of them failed, typed busy (Database::Run tries that one again).
  EXPECT_NE(committed_a.has_value(), committed_b.has_value());
  const core::Error& failure = committed_a ? committed_b.error() : committed_a.error();
  EXPECT_TRUE(IsBusy(failure)) << failure.message;
}

TEST_F(PostgresDatabaseTest, AWriteInAReadTransactionIsRefused) {
  auto r = db_->Read([](Transaction& tx) -> core::Result<int64_t> {
    return tx.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (999, 1)");
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, core::ErrorCode::kInternal);
}

TEST_F(PostgresDatabaseTest, AConnectionTheServerEndedIsReconnected) {
  auto other = db_.OpenAnother({.pool_size = 1});
  ASSERT_TRUE(other);
  ASSERT_TRUE(db_->Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
        "current_database() AND pid <> pg_backend_pid()");
  }));
  // The first use finds it gone (store_busy: nothing happened); the next reconnects.
  auto first = other->Read([](Transaction& tx) { return tx.QueryOne("SELECT 1 AS one"); });
  if (!first) {
    EXPECT_TRUE(IsBusy(first.error())) << first.error().message;
  }
  auto again = other->Read([](Transaction& tx) { return tx.QueryOne("SELECT 1 AS one"); });
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)->Int("one"), 1);
}

TEST_F(PostgresDatabaseTest, AnUnreachableServerIsStoreUnavailableWithoutThePassword) {
  const uint16_t port = testing::FreePort();
  auto db = PostgresDatabase::Open(
      {.url = "postgresql://gw:s3cret@127.0.0.1:" + std::to_string(port) + "/nothing"});
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(db.error().api_code, "store_unavailable");
  EXPECT_EQ(db.error().message.find("s3cret"), std::string::npos) << db.error().message;
}

}  // namespace
}  // namespace gpuwerk::store
