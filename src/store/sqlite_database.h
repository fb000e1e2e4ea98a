#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store {

/// Options for SqliteDatabase.
struct SqliteOptions {
  std::string path;            ///< database file; ":memory:" is not supported (pooled connections)
  int pool_size = 4;           ///< connections kept open
  int busy_timeout_ms = 5000;  ///< how long a statement waits for a lock before store_busy
};

/// The embedded store on SQLite 3 (https://sqlite.org/lang.html): WAL journal, foreign keys on,
/// a busy timeout, a small pool of connections each with a prepared-statement cache. Write
/// transactions start with BEGIN IMMEDIATE. Thread-safe.
class SqliteDatabase final : public Database {
 public:
  /// Opens (creating if needed) the file and configures it. Errors: kUnavailable when the file
  /// cannot be opened or is not a database.
  static core::Result<std::unique_ptr<SqliteDatabase>> Open(const SqliteOptions& options);
  ~SqliteDatabase() override;

  core::Result<std::unique_ptr<Transaction>> Begin(TxMode mode) override;
  std::string_view Backend() const override { return "sqlite"; }

  struct Pool;  // internal

 private:
  explicit SqliteDatabase(std::unique_ptr<Pool> pool);
  std::unique_ptr<Pool> pool_;
};

}  // namespace gpuwerk::store
