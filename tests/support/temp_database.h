#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "store/database.h"
#include "store/sqlite_database.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {

/// A migrated SQLite store in a fresh temp directory, for unit tests of code that takes a
/// `store::Database&`. Use it as a fixture member in place of a `std::unique_ptr` to the store:
/// `ASSERT_TRUE(db_.Open());` in SetUp, then `*db_`, `db_->Read(…)`, `db_.reset()` (closes it, e.g.
/// before the objects that use it are gone). The directory (with the file, its WAL and anything a
/// test puts beside them) is removed when the object dies.
class TempDatabase {
 public:
  TempDatabase() = default;
  TempDatabase(const TempDatabase&) = delete;
  TempDatabase& operator=(const TempDatabase&) = delete;
  ~TempDatabase() { db_.reset(); }  // closed before its directory goes

  /// Opens `path()` with `options` (its `path` is replaced) and, unless `migrate` is false, applies
  /// the schema. A failure says why (the store's message).
  ::testing::AssertionResult Open(store::SqliteOptions options = {}, bool migrate = true) {
    options.path = path();
    auto db = store::SqliteDatabase::Open(options);
    if (!db)
      return ::testing::AssertionFailure() << "open " << path() << ": " << db.error().message;
    db_ = std::move(*db);
    if (migrate) {
      if (auto m = store::Migrate(*db_); !m) {
        return ::testing::AssertionFailure() << "migrate: " << m.error().message;
      }
    }
    return ::testing::AssertionSuccess();
  }

  /// Another handle (its own pool) on the same file, not migrated again; null (with a test
  /// failure) when it does not open.
  std::unique_ptr<store::SqliteDatabase> OpenAnother(store::SqliteOptions options = {}) const {
    options.path = path();
    auto db = store::SqliteDatabase::Open(options);
    EXPECT_TRUE(db) << db.error().message;
    return db ? std::move(*db) : nullptr;
  }

  /// Closes the store (the file stays until the object dies).
  void reset() { db_.reset(); }

  store::SqliteDatabase& operator*() const { return *db_; }
  store::SqliteDatabase* operator->() const { return db_.get(); }
  store::SqliteDatabase* get() const { return db_.get(); }
  explicit operator bool() const { return db_ != nullptr; }

  /// The temp directory (for files a test puts beside the store).
  const std::filesystem::path& dir() const { return dir_.path(); }
  /// The database file.
  std::string path() const { return (dir_.path() / "db.sqlite").string(); }

 private:
  TempDir dir_;
  std::unique_ptr<store::SqliteDatabase> db_;
};

}  // namespace gpuwerk::testing
