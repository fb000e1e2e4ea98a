#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "store/value.h"

namespace gpuwerk::store {

/// One open transaction on a Database. Statements use `?` placeholders, bound in order, in SQL
/// that both SQLite and PostgreSQL accept (the PostgreSQL backend rewrites `?` to `$n`).
/// A Transaction is used by one thread at a time; if it is destroyed without Commit() it rolls
/// back. Errors: a unique or foreign-key violation is ConstraintViolationError
/// (IsConstraintViolation); a busy or locked database is BusyError (IsBusy); a full disk is
/// StorageFullError (IsStorageFull); anything else kInternal ("store_error").
class Transaction {
 public:
  virtual ~Transaction() = default;
  /// Runs a statement that returns rows.
  virtual core::Result<std::vector<Row>> Query(std::string_view sql,
                                               std::initializer_list<Value> params = {}) = 0;
  /// Runs a statement; returns the number of rows it changed.
  virtual core::Result<int64_t> Exec(std::string_view sql,
                                     std::initializer_list<Value> params = {}) = 0;
  /// Runs a statement that returns at most one row; nullopt when it returned none.
  core::Result<std::optional<Row>> QueryOne(std::string_view sql,
                                            std::initializer_list<Value> params = {});
  /// Runs several `;`-separated statements without parameters (migrations only).
  virtual core::Result<void> ExecScript(std::string_view sql) = 0;
  /// Makes the changes durable. After Commit the transaction is finished.
  virtual core::Result<void> Commit() = 0;
};

/// Whether `error` is the store's "busy": another connection held the database (or a table) past
/// the busy timeout. kUnavailable, api code "store_busy". Database::Run retries these itself.
bool IsBusy(const core::Error& error);
/// Whether `error` is a schema constraint refusing a write (unique, primary key, foreign key,
/// check). Domain code turns it into its own code (`name_taken`) or retries a lost race.
bool IsConstraintViolation(const core::Error& error);
/// IsConstraintViolation for a unique or primary key (code kAlreadyExists).
bool IsUniqueViolation(const core::Error& error);
/// Whether `error` is the store's "full": a write found no space on the disk that holds the
/// database (or passed its size limit). kUnavailable (503), api code "storage_full", with a
/// generic message; the backend logs the database's own words once per change of state.
bool IsStorageFull(const core::Error& error);

/// The errors a backend returns for those two cases, typed by core::ErrorReason (the one place
/// their outward labels are set). `message` says what failed, without the caller's values.
core::Error BusyError(std::string message);
/// kAlreadyExists when `unique` (a unique or primary key), else kFailedPrecondition; api code
/// "constraint_violation".
core::Error ConstraintViolationError(bool unique, std::string message);
/// The error of a write the disk had no room for (see IsStorageFull). Carries
/// `retry_after_seconds` (30).
core::Error StorageFullError();

/// Whether a transaction will write. Write transactions take the database's write lock at the
/// start (SQLite `BEGIN IMMEDIATE`) so two writers never deadlock on lock upgrade.
enum class TxMode { kRead, kWrite };

/// The store: a SQL database holding all of gpuwerk's state. Thread-safe; implementations keep a
/// pool of connections. Backends: SqliteDatabase (embedded default), PostgresDatabase.
class Database {
 public:
  virtual ~Database() = default;
  /// Opens a transaction. Blocks while every pooled connection is in use.
  virtual core::Result<std::unique_ptr<Transaction>> Begin(TxMode mode) = 0;
  /// The backend's name, "sqlite" or "postgresql".
  virtual std::string_view Backend() const = 0;
  /// How many times Run tries a transaction again after a retryable conflict (IsBusy): 5 on
  /// SQLite, whose busy timeout has already waited; PostgreSQL's serialization failures come at
  /// once and want more (PostgresOptions::conflict_retries).
  virtual int ConflictRetries() const { return 5; }
  /// Called by Run before it tries a transaction again (`attempt` 1, 2, …): nothing on SQLite, a
  /// short random backoff on PostgreSQL, so that transactions that conflicted do not meet again.
  virtual void BeforeRetry(int attempt) { (void)attempt; }

  /// Runs `fn` in one transaction and commits when it returns a value; rolls back when it
  /// returns an error (which is passed on). `fn` may run more than once when the backend
  /// reports a retryable conflict (at most ConflictRetries() more times), so it must have no
  /// effects outside the transaction.
  template <class Fn>
  auto Run(TxMode mode, Fn&& fn) -> std::invoke_result_t<Fn, Transaction&> {
    using R = std::invoke_result_t<Fn, Transaction&>;
    const int retries = ConflictRetries();
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) BeforeRetry(attempt);
      auto tx = Begin(mode);
      if (!tx) return std::unexpected(tx.error());
      R result = fn(**tx);
      if (!result) {
        if (IsBusy(result.error()) && attempt < retries) continue;
        return result;
      }
      auto committed = (*tx)->Commit();
      if (!committed) {
        if (IsBusy(committed.error()) && attempt < retries) continue;
        return std::unexpected(committed.error());
      }
      return result;
    }
  }
  /// Run(TxMode::kWrite, fn).
  template <class Fn>
  auto Write(Fn&& fn) {
    return Run(TxMode::kWrite, std::forward<Fn>(fn));
  }
  /// Run(TxMode::kRead, fn).
  template <class Fn>
  auto Read(Fn&& fn) {
    return Run(TxMode::kRead, std::forward<Fn>(fn));
  }
};

/// Applies every migration in store/migrations.cc not yet recorded in `schema_migrations`,
/// each in its own transaction, in order. Several processes may migrate one PostgreSQL
/// database at once: each migration is applied once (they take turns on `schema_migrations`).
/// Errors: kFailedPrecondition "schema_too_new" when the database holds a migration newer than
/// this build knows (a newer gpuwerk migrated it: nothing is changed, and this build must not
/// run on it); kInternal when a migration fails (the database is left at the last good version).
core::Result<void> Migrate(Database& db);

/// The newest schema version this build knows.
int LatestSchemaVersion();

/// The newest migration applied to `db` (0 for an empty database, without creating anything).
/// Errors: the store's.
core::Result<int> SchemaVersion(Database& db);

/// Fails with kFailedPrecondition "schema_too_new" when `db`'s schema version is newer than
/// LatestSchemaVersion() (the message names both and says to run the newer gpuwerk); Migrate
/// checks this first.
core::Result<void> RefuseNewerSchema(Database& db);

}  // namespace gpuwerk::store
