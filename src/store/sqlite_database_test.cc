#include "store/sqlite_database.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "store/database.h"

namespace gpuwerk::store {
namespace {

class SqliteDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpuwerk-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto db = SqliteDatabase::Open({.path = (dir_ / "db.sqlite").string()});
    ASSERT_TRUE(db) << db.error().message;
    db_ = std::move(*db);
    ASSERT_TRUE(Migrate(*db_));
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::unique_ptr<SqliteDatabase> db_;
};

TEST_F(SqliteDatabaseTest, MigrateIsIdempotent) {
  ASSERT_TRUE(Migrate(*db_));
  auto v = db_->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT MAX(version) FROM schema_migrations"));
    return row->Int(0);
  });
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, LatestSchemaVersion());
}

TEST_F(SqliteDatabaseTest, ErrorRollsBackTheWholeTransaction) {
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

TEST_F(SqliteDatabaseTest, ConcurrentWritersDoNotLoseUpdates) {
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

TEST_F(SqliteDatabaseTest, NullsAndTypesRoundTrip) {
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

}  // namespace
}  // namespace gpuwerk::store
