#include "store/sqlite_database.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#include "store/database.h"
#include "tests/support/eventually.h"
#include "tests/support/temp_database.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::store {
namespace {

class SqliteDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(db_.Open()); }
  void TearDown() override { db_.reset(); }
  testing::TempDatabase db_{testing::TestBackend::kSqlite};
};

TEST_F(SqliteDatabaseTest, AWriterHeldPastTheBusyTimeoutIsTypedBusy) {
  auto holder = db_->Begin(TxMode::kWrite);
  ASSERT_TRUE(holder) << holder.error().message;
  auto other =
      db_.OpenAnother({.pool_size = 1, .busy_timeout_ms = 20, .background_checkpoint = false});
  ASSERT_TRUE(other);
  auto begun = other->Begin(TxMode::kWrite);
  ASSERT_FALSE(begun);
  EXPECT_TRUE(IsBusy(begun.error())) << begun.error().message;
  EXPECT_FALSE(IsConstraintViolation(begun.error()));
  EXPECT_EQ(begun.error().code, core::ErrorCode::kUnavailable);
  EXPECT_EQ(begun.error().api_code, "store_busy");
}

/// The permission bits of `path`; 0 when it does not exist.
unsigned ModeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

TEST(SqliteFileModeTest, TheFileItsWalAndItsShmAreOwnerOnlyWhateverTheUmask) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "db.sqlite").string();
  const mode_t umask_before = ::umask(022);
  auto db = SqliteDatabase::Open({.path = path});
  ::umask(umask_before);
  ASSERT_TRUE(db) << db.error().message;
  ASSERT_TRUE(Migrate(**db));  // writes: the -wal and -shm files exist while the store is open
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path + "-wal"), 0600u);
  EXPECT_EQ(ModeOf(path + "-shm"), 0600u);
}

TEST(SqliteFileModeTest, AWorldReadableStoreAnOlderBuildLeftIsNarrowedAtOpen) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "db.sqlite").string();
  {
    auto db = SqliteDatabase::Open({.path = path});
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE(Migrate(**db));
  }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  const mode_t umask_before = ::umask(022);
  auto db = SqliteDatabase::Open({.path = path});
  ::umask(umask_before);
  ASSERT_TRUE(db) << db.error().message;
  ASSERT_TRUE((*db)->Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript("CREATE TABLE t (n BIGINT); INSERT INTO t VALUES (1);");
  }));
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path + "-wal"), 0600u);
  EXPECT_EQ(ModeOf(path + "-shm"), 0600u);
}

// The background WAL checkpointer (SqliteOptions::background_checkpoint).
class SqliteCheckpointTest : public SqliteDatabaseTest {
 protected:
  void SetUp() override {
    SqliteDatabaseTest::SetUp();
    db_.reset();  // each test opens the file with its own options
  }
  std::unique_ptr<SqliteDatabase> OpenWith(SqliteOptions options) {
    options.path = path();
    auto db = SqliteDatabase::Open(options);
    EXPECT_TRUE(db) << db.error().message;
    return db ? std::move(*db) : nullptr;
  }
  std::string path() const { return db_.path(); }
  /// Bytes in the -wal file (0 when there is none).
  int64_t WalBytes() const {
    std::error_code ec;
    auto n = std::filesystem::file_size(path() + "-wal", ec);
    return ec ? 0 : static_cast<int64_t>(n);
  }
  /// One commit that writes about `bytes` bytes.
  static void Insert(Database& db, int bytes) {
    auto r = db.Write([&](Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.Exec("INSERT INTO blobs (b) VALUES (?)", {std::string(bytes, 'x')}));
      return {};
    });
    ASSERT_TRUE(r) << r.error().message;
  }
  static void CreateBlobs(Database& db) {
    ASSERT_TRUE(db.Write([](Transaction& tx) -> core::Result<void> {
      return tx.ExecScript("CREATE TABLE IF NOT EXISTS blobs (b TEXT NOT NULL)");
    }));
  }
};

TEST_F(SqliteCheckpointTest, PooledConnectionsDoNotCheckpointInCommits) {
  auto db = OpenWith({});
  ASSERT_TRUE(db->CheckpointStats().running);
  auto pages = db->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("PRAGMA wal_autocheckpoint"));
    return row->Int(0);
  });
  ASSERT_TRUE(pages);
  EXPECT_EQ(*pages, 0);

  auto off = OpenWith({.background_checkpoint = false});
  EXPECT_FALSE(off->CheckpointStats().running);
  pages = off->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("PRAGMA wal_autocheckpoint"));
    return row->Int(0);
  });
  ASSERT_TRUE(pages);
  EXPECT_EQ(*pages, 1000);  // SQLite's default kept
}

TEST_F(SqliteCheckpointTest, WalStaysBoundedOverManyCommits) {
  // 3,000 commits of ~2 KB (about 3 pages each with the b-tree pages they touch): some 9,000
  // pages (36 MB) through the WAL. Without any checkpoint the -wal file would hold them all.
  auto db = OpenWith(
      {.checkpoint_interval_ms = 50, .checkpoint_wake_pages = 200, .wal_truncate_bytes = 2 << 20});
  CreateBlobs(*db);
  int64_t largest = 0;
  for (int i = 0; i < 3000; ++i) {
    Insert(*db, 2000);
    largest = std::max(largest, WalBytes());
  }
  // The checkpointer copies as the writes go; a steady writer rarely leaves it the moment to
  // restart the WAL, so the WAL grows to the bound (2 MiB) and a RESTART starts it over there;
  // the file holds that plus what a few wakes' worth of commits add meanwhile.
  EXPECT_LT(largest, int64_t{10} << 20) << "the WAL grew to " << largest << " bytes";
  const auto stats = db->CheckpointStats();
  EXPECT_GT(stats.passive, 0);
  EXPECT_GT(stats.restarted + stats.truncated, 0);  // 36 MB through a 2 MiB bound
  EXPECT_EQ(stats.failed, 0);
  // Once the writes stop, the next look copies everything that is left (or a TRUNCATE emptied
  // the WAL: 0 of 0).
  EXPECT_TRUE(testing::Eventually(
      [&] {
        auto s = db->CheckpointStats();
        return s.last_copied_frames == s.last_wal_frames;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(10)));
}

TEST_F(SqliteCheckpointTest, AWriterCheckpointsItselfWhenTheThreadFallsBehind) {
  // A checkpointer that never looks (an interval and a wake threshold far beyond the test)
  // stands for a thread the machine gives no CPU: the writers bound the WAL themselves, at
  // twice wal_truncate_bytes (2 MiB here), restarting it on their own connection.
  auto db = OpenWith({.checkpoint_interval_ms = 600'000,
                      .checkpoint_wake_pages = 1'000'000,
                      .wal_truncate_bytes = 1 << 20});
  CreateBlobs(*db);
  int64_t largest = 0;
  for (int i = 0; i < 3000; ++i) {  // ~36 MB through the WAL, as above
    Insert(*db, 2000);
    largest = std::max(largest, WalBytes());
  }
  // The file reaches the bound's double plus the one commit that crossed it, never more.
  EXPECT_LT(largest, (int64_t{2} << 20) + (int64_t{64} << 10))
      << "the WAL grew to " << largest << " bytes";
  const auto stats = db->CheckpointStats();
  EXPECT_GT(stats.by_writer, 0);
  EXPECT_EQ(stats.restarted, stats.by_writer);  // the thread never ran one
  EXPECT_EQ(stats.failed, 0);
  auto count = db->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM blobs"));
    return row->Int(0);
  });
  ASSERT_TRUE(count);
  EXPECT_EQ(*count, 3000);
}

TEST_F(SqliteCheckpointTest, TruncatesAWalThatReadersLetGrowPastTheBound) {
  auto db = OpenWith({.pool_size = 2,
                      .checkpoint_interval_ms = 20,
                      .checkpoint_wake_pages = 50,
                      .wal_truncate_bytes = 1 << 20});
  CreateBlobs(*db);
  Insert(*db, 100);
  {
    // A reader on an old snapshot: no checkpoint can copy past it, so the WAL only grows.
    auto reader = db->Begin(TxMode::kRead);
    ASSERT_TRUE(reader);
    ASSERT_TRUE((*reader)->Query("SELECT COUNT(*) FROM blobs"));
    for (int i = 0; i < 200; ++i) Insert(*db, 16000);
    EXPECT_GT(WalBytes(), int64_t{2} << 20);
    ASSERT_TRUE((*reader)->Query("SELECT COUNT(*) FROM blobs"));
  }
  // The reader is gone: the checkpointer retries (an incomplete checkpoint is pending work even
  // without new commits) and, with no one writing, TRUNCATE empties the file.
  EXPECT_TRUE(testing::Eventually(
      [&] { return db->CheckpointStats().truncated > 0 && WalBytes() <= (1 << 20); },
      std::chrono::seconds(10), std::chrono::milliseconds(10)))
      << "the WAL is still " << WalBytes() << " bytes";
  EXPECT_EQ(db->CheckpointStats().failed, 0);
  auto count = db->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM blobs"));
    return row->Int(0);
  });
  ASSERT_TRUE(count);
  EXPECT_EQ(*count, 201);
}

/// Routes spdlog's default logger into a string while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "captured", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  /// How many lines contain `needle`.
  int Count(std::string_view needle) const {
    std::istringstream lines(out_.str());
    int n = 0;
    for (std::string line; std::getline(lines, line);) n += line.find(needle) != std::string::npos;
    return n;
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(SqliteCheckpointTest, AFullDiskIsStorageFullWarnedOnceAndWritesRecover) {
  // The database's size limit (PRAGMA max_page_count, on the pool's one connection) stands for
  // a full disk: SQLite answers both with SQLITE_FULL.
  auto db = OpenWith({.pool_size = 1});
  CreateBlobs(*db);
  CapturedLog log;
  auto limit = [&](const std::string& pages) {
    return db->Write([&](Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.Query("PRAGMA max_page_count = " + pages));
      return {};
    });
  };
  ASSERT_TRUE(db->Write([&](Transaction& tx) -> core::Result<void> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("PRAGMA page_count"));
    GPUWERK_TRY(tx.Query("PRAGMA max_page_count = " + std::to_string(row->Int(0))));
    return {};
  }));
  for (int i = 0; i < 5; ++i) {
    auto r = db->Write([](Transaction& tx) -> core::Result<void> {
      GPUWERK_TRY(tx.Exec("INSERT INTO blobs (b) VALUES (?)", {std::string(16000, 'x')}));
      return {};
    });
    ASSERT_FALSE(r) << "write " << i << " found room";
    EXPECT_TRUE(IsStorageFull(r.error())) << r.error().api_code << ": " << r.error().message;
    EXPECT_EQ(r.error().code, core::ErrorCode::kUnavailable);  // 503
    EXPECT_EQ(r.error().api_code, "storage_full");
    // A generic message for whoever made the request; SQLite's own words go to the log.
    EXPECT_EQ(r.error().message.find("database or disk"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(log.Count("storage_full"), 1) << log.text();  // once per change of state
  EXPECT_EQ(log.Count("database or disk is full"), 1) << log.text();

  ASSERT_TRUE(limit("1000000"));  // space again
  Insert(*db, 16000);
  EXPECT_EQ(log.Count("succeed again"), 1) << log.text();
  auto count = db->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM blobs"));
    return row->Int(0);
  });
  ASSERT_TRUE(count);
  EXPECT_EQ(*count, 1);  // the refused writes left nothing behind
}

TEST_F(SqliteCheckpointTest, DestructorJoinsPromptlyAndLeavesTheDataInTheFile) {
  // An interval far longer than the test: the destructor must wake the thread, not wait it out.
  auto db = OpenWith({.checkpoint_interval_ms = 60'000, .checkpoint_wake_pages = 1'000'000});
  CreateBlobs(*db);
  for (int i = 0; i < 50; ++i) Insert(*db, 1000);
  EXPECT_GT(WalBytes(), 0);
  const auto start = std::chrono::steady_clock::now();
  db.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Closed cleanly: the last close checkpointed and removed the WAL; a fresh open sees the rows.
  EXPECT_EQ(WalBytes(), 0);
  db = OpenWith({});
  auto count = db->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT COUNT(*) FROM blobs"));
    return row->Int(0);
  });
  ASSERT_TRUE(count);
  EXPECT_EQ(*count, 50);
}

TEST_F(SqliteCheckpointTest, ConcurrentWritersAndReadersWhileCheckpointingOften) {
  // Checkpoints as often as the thread allows, against 4 writers and 2 readers.
  auto db = OpenWith({.pool_size = 6, .checkpoint_interval_ms = 1, .checkpoint_wake_pages = 1});
  ASSERT_TRUE(db->Write([](Transaction& tx) -> core::Result<void> {
    return tx.ExecScript(
        "CREATE TABLE counter (n BIGINT NOT NULL); INSERT INTO counter VALUES (0);");
  }));
  std::atomic<bool> writing{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        auto r = db->Write([](Transaction& tx) -> core::Result<void> {
          GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT n FROM counter"));
          GPUWERK_TRY(tx.Exec("UPDATE counter SET n = ?", {row->Int(0) + 1}));
          return {};
        });
        ASSERT_TRUE(r) << r.error().message;
      }
    });
  }
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      int64_t seen = 0;
      while (writing.load()) {
        auto n = db->Read([](Transaction& tx) -> core::Result<int64_t> {
          GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT n FROM counter"));
          return row->Int(0);
        });
        ASSERT_TRUE(n) << n.error().message;
        EXPECT_GE(*n, seen);  // never goes back
        seen = *n;
      }
    });
  }
  for (auto& t : threads) t.join();
  writing = false;
  for (auto& t : readers) t.join();
  auto n = db->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT n FROM counter"));
    return row->Int(0);
  });
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 400);
  // The 400 commits left frames in the WAL, so the checkpointer runs a PASSIVE checkpoint at its
  // next pass; on a loaded machine the writers may all finish before its thread is first
  // scheduled, so wait for that pass instead of assuming it happened during the writes.
  EXPECT_TRUE(testing::Eventually([&] { return db->CheckpointStats().passive > 0; },
                                  std::chrono::seconds(10), std::chrono::milliseconds(5)));
  EXPECT_EQ(db->CheckpointStats().failed, 0);
}

TEST(SqliteMemoryTest, InMemoryDatabaseWorksWithoutACheckpointer) {
  auto db = SqliteDatabase::Open({.path = ":memory:", .pool_size = 1});
  ASSERT_TRUE(db) << db.error().message;
  EXPECT_FALSE((*db)->CheckpointStats().running);
  ASSERT_TRUE(Migrate(**db));
  auto v = (*db)->Read([](Transaction& tx) -> core::Result<int64_t> {
    GPUWERK_ASSIGN_OR_RETURN(auto row, tx.QueryOne("SELECT MAX(version) FROM schema_migrations"));
    return row->Int(0);
  });
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, LatestSchemaVersion());
}

}  // namespace
}  // namespace gpuwerk::store
