#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store {

/// Options for SqliteDatabase.
struct SqliteOptions {
  std::string path;   ///< database file; ":memory:" only with pool_size 1 (each connection of
                      ///< the pool would otherwise open a database of its own)
  int pool_size = 4;  ///< connections kept open
  int busy_timeout_ms = 5000;  ///< how long a statement waits for a lock before store_busy

  /// Checkpoint the WAL (copy its pages back into the database file,
  /// https://sqlite.org/wal.html#checkpointing) in a background thread with a connection of its
  /// own, instead of SQLite's auto-checkpoint inside whichever commit crosses 1,000 WAL pages
  /// (4–10 ms added to that commit). The pooled connections then run with
  /// `PRAGMA wal_autocheckpoint=0`. Ignored (SQLite's default kept) when the database is not in
  /// WAL mode, e.g. ":memory:".
  bool background_checkpoint = true;
  /// Milliseconds between the checkpointer's looks: it checkpoints (PASSIVE: never waits for
  /// readers or writers) when something was committed since its last checkpoint, or that one
  /// could not copy every frame. A commit's pages wait at most about this long in the WAL.
  int checkpoint_interval_ms = 250;
  /// WAL frames (pages): a commit that leaves at least this many frames not yet checkpointed
  /// in the WAL wakes the checkpointer at once, so a burst of writes does not wait for the
  /// interval. SQLite's own auto-checkpoint threshold is 1,000.
  int checkpoint_wake_pages = 1000;
  /// Bytes: the WAL's bound. When the frames in use pass it (a steady stream of writers seldom
  /// leaves the WAL idle when a checkpoint completes, so it never restarts at frame 0; readers
  /// that keep checkpoints short; a burst), the checkpointer tries a RESTART checkpoint, which
  /// copies what is left and makes the next writer start the WAL over, so the file stops
  /// growing: once PASSIVE has caught up to within checkpoint_wake_pages frames (nothing much
  /// left to copy), or regardless at twice the bound. When the -wal file is larger than this
  /// but little of it is in use, it tries TRUNCATE (file to zero bytes, giving the disk back),
  /// only when nothing was committed during the PASSIVE before it (ftruncate of a large file
  /// takes 100+ ms). Both wait at most `checkpoint_busy_timeout_ms` for the write lock and for
  /// readers of older snapshots; this process's new write transactions wait for them meanwhile
  /// (Begin(kWrite) blocks); they are tried again at the next look when they could not finish.
  /// Should the thread fall behind anyway (a machine whose CPUs are busy elsewhere may not run
  /// it for seconds while writers commit), a commit that leaves more than twice the bound in
  /// the WAL runs the RESTART itself on its own connection, without waiting for anyone.
  int64_t wal_truncate_bytes = int64_t{64} << 20;
  /// Milliseconds a RESTART or TRUNCATE attempt waits for locks (see wal_truncate_bytes).
  int checkpoint_busy_timeout_ms = 10;
};

/// What the background checkpointer has done since Open (counters, for tests and operators).
struct SqliteCheckpointStats {
  bool running = false;         ///< a checkpointer thread runs (option on and a WAL database)
  int64_t passive = 0;          ///< PASSIVE checkpoints completed (all or part of the WAL copied)
  int64_t restarted = 0;        ///< RESTART checkpoints that finished (the next writer starts over)
  int64_t by_writer = 0;        ///< of those, RESTARTs a committing writer ran itself (see below)
  int64_t truncated = 0;        ///< TRUNCATE checkpoints that emptied the -wal file
  int64_t busy = 0;             ///< checkpoints that returned SQLITE_BUSY (retried later)
  int64_t failed = 0;           ///< checkpoints that failed otherwise (logged at warn)
  int64_t last_wal_frames = 0;  ///< frames in the WAL at the last checkpoint
  int64_t last_copied_frames = 0;  ///< of those, frames in the database file after it
};

/// The embedded store on SQLite 3 (https://sqlite.org/lang.html): WAL journal, foreign keys on,
/// a busy timeout, a small pool of connections each with a prepared-statement cache, and (by
/// default) a background WAL checkpointer (SqliteOptions::background_checkpoint). Write
/// transactions start with BEGIN IMMEDIATE. Thread-safe.
class SqliteDatabase final : public Database {
 public:
  /// Opens (creating if needed) the file and configures it. The file and its -wal and -shm
  /// files are owner-only (0600) whatever the umask; wider ones an older build left are narrowed.
  /// Errors: kUnavailable "store_unavailable" when the file cannot be opened, made owner-only or
  /// is not a database.
  static core::Result<std::unique_ptr<SqliteDatabase>> Open(const SqliteOptions& options);
  /// Stops the checkpointer (one last PASSIVE checkpoint, then the thread is joined) and closes
  /// the connections. Every Transaction must have ended before.
  ~SqliteDatabase() override;

  core::Result<std::unique_ptr<Transaction>> Begin(TxMode mode) override;
  std::string_view Backend() const override { return "sqlite"; }

  /// The background checkpointer's counters (all zero and `running` false when it is off).
  SqliteCheckpointStats CheckpointStats() const;

  struct Pool;          // internal
  struct Checkpointer;  // internal

 private:
  SqliteDatabase(std::unique_ptr<Pool> pool, std::unique_ptr<Checkpointer> checkpointer);
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Checkpointer> checkpointer_;
};

}  // namespace gpuwerk::store
