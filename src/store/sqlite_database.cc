#include "store/sqlite_database.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpuwerk::store {
namespace {

using core::ErrorCode;

/// One open connection with its statement cache.
struct Connection {
  sqlite3* db = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> statements;

  /// Runs a parameterless statement through the cache (BEGIN, COMMIT, ROLLBACK).
  int Simple(const std::string& sql) {
    sqlite3_stmt*& stmt = statements[sql];
    if (!stmt) {
      int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) {
        statements.erase(sql);
        return rc;
      }
    }
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
  }

  ~Connection() {
    for (auto& [sql, stmt] : statements) sqlite3_finalize(stmt);
    if (db) sqlite3_close_v2(db);
  }
};

core::Error SqliteError(sqlite3* db, int rc, std::string_view what) {
  int primary = rc & 0xff;
  std::string msg = std::string(what) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    return core::Error(ErrorCode::kUnavailable, "store_busy", msg);
  }
  if (primary == SQLITE_CONSTRAINT) {
    int ext = rc;
    if (ext == SQLITE_CONSTRAINT_UNIQUE || ext == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return core::Error(ErrorCode::kAlreadyExists, "constraint_violation", msg);
    }
    return core::Error(ErrorCode::kFailedPrecondition, "constraint_violation", msg);
  }
  return core::Error(ErrorCode::kInternal, "store_error", msg);
}

}  // namespace

struct SqliteDatabase::Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Connection>> free;

  std::unique_ptr<Connection> Take() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !free.empty(); });
    auto c = std::move(free.back());
    free.pop_back();
    return c;
  }
  void Give(std::unique_ptr<Connection> c) {
    {
      std::lock_guard lock(mu);
      free.push_back(std::move(c));
    }
    cv.notify_one();
  }
};

namespace {

class SqliteTransaction final : public Transaction {
 public:
  SqliteTransaction(SqliteDatabase::Pool* pool, std::unique_ptr<Connection> conn)
      : pool_(pool), conn_(std::move(conn)) {}

  ~SqliteTransaction() override {
    if (!done_ && !sqlite3_get_autocommit(conn_->db)) conn_->Simple("ROLLBACK");
    pool_->Give(std::move(conn_));
  }

  core::Result<std::vector<Row>> Query(std::string_view sql,
                                       std::initializer_list<Value> params) override {
    std::vector<Row> rows;
    auto r = Run(sql, params, &rows);
    if (!r) return std::unexpected(r.error());
    return rows;
  }

  core::Result<int64_t> Exec(std::string_view sql, std::initializer_list<Value> params) override {
    auto r = Run(sql, params, nullptr);
    if (!r) return std::unexpected(r.error());
    return static_cast<int64_t>(sqlite3_changes(conn_->db));
  }

  core::Result<void> ExecScript(std::string_view sql) override {
    std::string s(sql);
    char* err = nullptr;
    int rc = sqlite3_exec(conn_->db, s.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : "";
      sqlite3_free(err);
      return core::Fail(ErrorCode::kInternal, "store_error", "script failed: " + msg);
    }
    return {};
  }

  core::Result<void> Commit() override {
    int rc = conn_->Simple("COMMIT");
    if (rc != SQLITE_OK) return std::unexpected(SqliteError(conn_->db, rc, "commit"));
    done_ = true;
    return {};
  }

 private:
  core::Result<void> Run(std::string_view sql, std::initializer_list<Value> params,
                         std::vector<Row>* rows) {
    sqlite3* db = conn_->db;
    std::string key(sql);
    sqlite3_stmt* stmt = nullptr;
    auto it = conn_->statements.find(key);
    if (it != conn_->statements.end()) {
      stmt = it->second;
    } else {
      int rc = sqlite3_prepare_v3(db, key.data(), static_cast<int>(key.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) return std::unexpected(SqliteError(db, rc, "prepare"));
      conn_->statements.emplace(key, stmt);
    }
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    if (static_cast<size_t>(sqlite3_bind_parameter_count(stmt)) != params.size()) {
      return core::Internal("statement expects " +
                            std::to_string(sqlite3_bind_parameter_count(stmt)) +
                            " parameters, got " + std::to_string(params.size()));
    }
    int idx = 1;
    for (const Value& v : params) {
      int rc = SQLITE_OK;
      if (auto* n = std::get_if<int64_t>(&v)) {
        rc = sqlite3_bind_int64(stmt, idx, *n);
      } else if (auto* d = std::get_if<double>(&v)) {
        rc = sqlite3_bind_double(stmt, idx, *d);
      } else if (auto* s = std::get_if<std::string>(&v)) {
        rc = sqlite3_bind_text(stmt, idx, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
      } else {
        rc = sqlite3_bind_null(stmt, idx);
      }
      if (rc != SQLITE_OK) return std::unexpected(SqliteError(db, rc, "bind"));
      ++idx;
    }
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        auto err = SqliteError(db, sqlite3_extended_errcode(db), "step");
        sqlite3_reset(stmt);
        return std::unexpected(err);
      }
      if (!rows) continue;
      int n = sqlite3_column_count(stmt);
      std::vector<Value> values;
      values.reserve(n);
      for (int c = 0; c < n; ++c) {
        switch (sqlite3_column_type(stmt, c)) {
          case SQLITE_INTEGER:
            values.emplace_back(static_cast<int64_t>(sqlite3_column_int64(stmt, c)));
            break;
          case SQLITE_FLOAT:
            values.emplace_back(sqlite3_column_double(stmt, c));
            break;
          case SQLITE_NULL:
            values.emplace_back(kNull);
            break;
          default: {
            auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
            values.emplace_back(std::string(p, sqlite3_column_bytes(stmt, c)));
          }
        }
      }
      rows->emplace_back(std::move(values));
    }
    sqlite3_reset(stmt);
    return {};
  }

  SqliteDatabase::Pool* pool_;
  std::unique_ptr<Connection> conn_;
  bool done_ = false;
};

}  // namespace

SqliteDatabase::SqliteDatabase(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}
SqliteDatabase::~SqliteDatabase() = default;

core::Result<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(const SqliteOptions& options) {
  // Memory statistics take a global mutex on every SQLite allocation; gpuwerk does not read
  // them, and with several threads the lock is a measurable cost. Only possible before SQLite
  // initialises, so done once, first.
  static const bool configured = [] {
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    return sqlite3_initialize() == SQLITE_OK;
  }();
  if (!configured) {
    return core::Fail(ErrorCode::kUnavailable, "store_unavailable", "SQLite failed to initialise");
  }
  auto pool = std::make_unique<Pool>();
  for (int i = 0; i < std::max(1, options.pool_size); ++i) {
    auto conn = std::make_unique<Connection>();
    int rc =
        sqlite3_open_v2(options.path.c_str(), &conn->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      return core::Fail(ErrorCode::kUnavailable, "store_unavailable",
                        "cannot open SQLite database " + options.path + ": " +
                            (conn->db ? sqlite3_errmsg(conn->db) : sqlite3_errstr(rc)));
    }
    sqlite3_busy_timeout(conn->db, options.busy_timeout_ms);
    sqlite3_extended_result_codes(conn->db, 1);
    const char* pragmas =
        "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL; "
        "PRAGMA temp_store=MEMORY;";
    char* err = nullptr;
    if (sqlite3_exec(conn->db, pragmas, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return core::Fail(ErrorCode::kUnavailable, "store_unavailable",
                        "cannot configure SQLite database " + options.path + ": " + msg);
    }
    pool->free.push_back(std::move(conn));
  }
  return std::unique_ptr<SqliteDatabase>(new SqliteDatabase(std::move(pool)));
}

core::Result<std::unique_ptr<Transaction>> SqliteDatabase::Begin(TxMode mode) {
  auto conn = pool_->Take();
  static const std::string kBeginWrite = "BEGIN IMMEDIATE";
  static const std::string kBeginRead = "BEGIN";
  int rc = conn->Simple(mode == TxMode::kWrite ? kBeginWrite : kBeginRead);
  if (rc != SQLITE_OK) {
    auto err = SqliteError(conn->db, rc, "begin");
    pool_->Give(std::move(conn));
    return std::unexpected(err);
  }
  return std::unique_ptr<Transaction>(new SqliteTransaction(pool_.get(), std::move(conn)));
}

}  // namespace gpuwerk::store
