#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "store/database.h"
#include "store/postgres_database.h"
#include "store/sqlite_database.h"
#include "tests/support/postgres_server.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {

/// The backends a TempDatabase can be.
enum class TestBackend { kSqlite, kPostgres };

/// The backend of the tests' stores: GPUWERK_TEST_DATABASE=postgresql (or postgres) makes it
/// PostgreSQL (tests/support/postgres_server.h starts one), anything else (unset) SQLite.
inline TestBackend TestBackendFromEnvironment() {
  const char* v = std::getenv("GPUWERK_TEST_DATABASE");
  const std::string_view name = v ? v : "";
  return name == "postgresql" || name == "postgres" ? TestBackend::kPostgres : TestBackend::kSqlite;
}

/// "sqlite" or "postgresql", e.g. for a parameterised test's name.
inline const char* BackendName(TestBackend backend) {
  return backend == TestBackend::kPostgres ? "postgresql" : "sqlite";
}

/// A migrated store for unit tests of code that takes a `store::Database&`: a SQLite file in a
/// fresh temp directory, or with TestBackend::kPostgres (the default when GPUWERK_TEST_DATABASE
/// says so), a fresh database on the test process's PostgreSQL server (PostgresServer::Shared),
/// dropped when the object dies. Use it as a fixture member in place of a `std::unique_ptr` to
/// the store: `ASSERT_TRUE(db_.Open());` in SetUp, then `*db_`, `db_->Read(…)`, `db_.reset()`
/// (closes it, e.g. before the objects that use it are gone). The directory (with the file, its
/// WAL and anything a test puts beside them) is removed when the object dies.
class TempDatabase {
 public:
  explicit TempDatabase(TestBackend backend = TestBackendFromEnvironment()) : backend_(backend) {}
  TempDatabase(const TempDatabase&) = delete;
  TempDatabase& operator=(const TempDatabase&) = delete;
  ~TempDatabase() {
    db_.reset();  // closed before its directory or database goes
    if (!url_.empty()) {
      std::string error;
      std::string failure;
      if (auto* server = PostgresServer::Shared(&failure); server != nullptr) {
        server->DropDatabase(url_, &error);
      }
    }
  }

  /// Opens the store with `options` (SQLite: its `path` is replaced by `path()`; PostgreSQL: its
  /// pool_size and busy_timeout_ms, as the lock timeout) and, unless `migrate` is false, applies
  /// the schema. A failure says why (the store's message).
  ::testing::AssertionResult Open(store::SqliteOptions options = {}, bool migrate = true) {
    if (backend_ == TestBackend::kPostgres) {
      if (url_.empty()) {
        std::string error;
        auto* server = PostgresServer::Shared(&error);
        if (server == nullptr) return ::testing::AssertionFailure() << "PostgreSQL: " << error;
        auto url = server->CreateDatabase(&error);
        if (!url) return ::testing::AssertionFailure() << "PostgreSQL: " << error;
        url_ = *url;
      }
      auto db = store::PostgresDatabase::Open(PostgresOptionsFor(options));
      if (!db)
        return ::testing::AssertionFailure() << "open " << url_ << ": " << db.error().message;
      db_ = std::move(*db);
    } else {
      options.path = path();
      auto db = store::SqliteDatabase::Open(options);
      if (!db)
        return ::testing::AssertionFailure() << "open " << path() << ": " << db.error().message;
      db_ = std::move(*db);
    }
    if (migrate) {
      if (auto m = store::Migrate(*db_); !m) {
        return ::testing::AssertionFailure() << "migrate: " << m.error().message;
      }
    }
    return ::testing::AssertionSuccess();
  }

  /// Another handle (its own pool) on the same store, not migrated again; null (with a test
  /// failure) when it does not open.
  std::unique_ptr<store::Database> OpenAnother(store::SqliteOptions options = {}) const {
    if (backend_ == TestBackend::kPostgres) {
      auto db = store::PostgresDatabase::Open(PostgresOptionsFor(options));
      EXPECT_TRUE(db) << db.error().message;
      return db ? std::move(*db) : nullptr;
    }
    options.path = path();
    auto db = store::SqliteDatabase::Open(options);
    EXPECT_TRUE(db) << db.error().message;
    return db ? std::move(*db) : nullptr;
  }

  /// Closes the store (the file or database stays until the object dies).
  void reset() { db_.reset(); }

  store::Database& operator*() const { return *db_; }
  store::Database* operator->() const { return db_.get(); }
  store::Database* get() const { return db_.get(); }
  explicit operator bool() const { return db_ != nullptr; }

  TestBackend backend() const { return backend_; }
  /// The temp directory (for files a test puts beside the store).
  const std::filesystem::path& dir() const { return dir_.path(); }
  /// The SQLite database file (unused with PostgreSQL).
  std::string path() const { return (dir_.path() / "db.sqlite").string(); }
  /// The PostgreSQL database's URL ("" with SQLite, or before Open).
  const std::string& url() const { return url_; }

 private:
  store::PostgresOptions PostgresOptionsFor(const store::SqliteOptions& options) const {
    return {
        .url = url_, .pool_size = options.pool_size, .lock_timeout_ms = options.busy_timeout_ms};
  }

  TestBackend backend_;
  TempDir dir_;
  std::string url_;
  std::unique_ptr<store::Database> db_;
};

}  // namespace gpuwerk::testing
