#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store {

/// Options for PostgresDatabase.
struct PostgresOptions {
  /// The server, as a libpq connection URI (https://www.postgresql.org/docs/15/libpq-connect.html
  /// "Connection URIs"): `postgresql://user:password@host:5432/dbname?sslmode=require`. Every
  /// libpq parameter works, including the PG* environment variables for what the URI leaves out.
  std::string url;
  int pool_size = 4;  ///< connections kept open; Begin blocks while all are in use
  /// Milliseconds a statement waits for a row or table lock (`lock_timeout`) before the
  /// transaction fails as store_busy (SQLite's busy timeout plays this part there).
  int lock_timeout_ms = 5000;
  /// Times Database::Run tries a transaction again after a serialization failure, a deadlock or
  /// a lock timeout (each a store_busy), with a random backoff of up to 1, 2, 4 … 64 ms first.
  int conflict_retries = 30;
};

/// Rewrites the `?` placeholders of `sql` as PostgreSQL's `$1`, `$2`, … in order, leaving those
/// in string literals ('…', with '' inside), quoted identifiers ("…") and comments (`--`, `/* */`)
/// alone. `*count` gets the number of placeholders.
std::string PostgresPlaceholders(std::string_view sql, int* count);

/// The store on PostgreSQL 13 or newer through libpq (the frontend/backend protocol 3.0,
/// https://www.postgresql.org/docs/15/protocol.html): a pool of connections, each with its own
/// cache of prepared statements (a statement is prepared once per connection and parameter types,
/// its `?` placeholders rewritten to `$n` once, by PostgresPlaceholders); parameters go typed
/// (BIGINT, DOUBLE PRECISION, TEXT; NULL untyped) in text format and results come back in text
/// format, read by column type: integers and integral NUMERIC (SUM of BIGINT) as int64, other
/// numbers as double, booleans as 0/1, everything else as text.
///
/// Isolation: a write transaction (TxMode::kWrite) is `SERIALIZABLE`, so every committed set of
/// transactions has the effect of some one-at-a-time order, as SQLite's single writer gives: the
/// services' read-check-write transactions (a free host, a queue's next `seq`, a balance) stay
/// correct against writers on other connections and other servers without locks of their own. A
/// transaction PostgreSQL cannot fit into such an order fails with a serialization failure
/// (SQLSTATE 40001), which is store_busy, as are deadlocks (40P01) and lock timeouts (55P03):
/// Database::Run rolls back and runs it again (`conflict_retries`, with a random backoff). A read
/// transaction (TxMode::kRead) is `REPEATABLE READ READ ONLY`: one snapshot for the whole
/// transaction, as a SQLite read transaction sees, never a serialization failure; a write in it is
/// refused (kInternal store_error).
///
/// Errors are typed as SqliteDatabase types them (database.h): a unique violation (23505) is
/// ConstraintViolationError(unique), the other integrity violations (class 23: foreign key, not
/// null, check) ConstraintViolationError(not unique); a full disk (53100) StorageFullError, with
/// the server's words logged once per change of state; a connection lost before COMMIT store_busy
/// (the transaction did not happen; the connection is reconnected at its next use), lost during
/// COMMIT kUnavailable "store_unavailable" (it may have happened: never retried); anything else
/// kInternal "store_error". Messages carry the server's primary message only, never its DETAIL
/// (which quotes the row's values).
///
/// An error inside a transaction aborts it on PostgreSQL (every later statement fails until the
/// rollback), where SQLite would let it go on: a transaction that meets an error must end, as
/// every Write/Read lambda already does by returning the error.
///
/// Session-level features (LISTEN/NOTIFY, advisory locks held across transactions) need a direct
/// or session-mode pooled connection; the store itself uses only transaction-scoped state, so it
/// also works through a transaction-mode pooler (PgBouncer) except for its prepared statements,
/// which need PgBouncer 1.21+ with `max_prepared_statements` (docs/database.md).
/// Thread-safe.
class PostgresDatabase final : public Database {
 public:
  /// Connects `pool_size` connections to `options.url` and sets each one up (lock_timeout, UTC,
  /// warnings only). Errors: kUnavailable "store_unavailable" when the server cannot be reached,
  /// refuses the login, or is older than PostgreSQL 13 (the message says which, never the
  /// password).
  static core::Result<std::unique_ptr<PostgresDatabase>> Open(const PostgresOptions& options);
  /// Closes the connections. Every Transaction must have ended before.
  ~PostgresDatabase() override;

  core::Result<std::unique_ptr<Transaction>> Begin(TxMode mode) override;
  std::string_view Backend() const override { return "postgresql"; }
  int ConflictRetries() const override;
  void BeforeRetry(int attempt) override;

  struct Pool;  // internal

 private:
  explicit PostgresDatabase(std::unique_ptr<Pool> pool);
  std::unique_ptr<Pool> pool_;
};

/// `url` with its password (in the user-info part or a `password=` parameter) replaced by "***",
/// for log lines and error messages.
std::string RedactDatabaseUrl(std::string_view url);

}  // namespace gpuwerk::store
