#include "store/sqlite_database.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "store/internal/raw_statements.h"

namespace gpuwerk::store {
namespace {

using core::ErrorCode;

/// Hashes std::string and std::string_view alike, so the statement cache is searched by the
/// caller's SQL text without copying it into a string first.
struct SqlHash {
  using is_transparent = void;
  size_t operator()(std::string_view sql) const { return std::hash<std::string_view>{}(sql); }
};

/// One open connection with its statement cache.
struct Connection {
  sqlite3* db = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*, SqlHash, std::equal_to<>> statements;
  /// The column names of each cached statement's result, made at its first row.
  std::unordered_map<sqlite3_stmt*, ColumnNames> columns;

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
    return BusyError(std::move(msg));
  }
  if (primary == SQLITE_CONSTRAINT) {
    return ConstraintViolationError(
        rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY, std::move(msg));
  }
  return core::Error(ErrorCode::kInternal, "store_error", msg);
}

/// Makes the database file `path` owner-only (0600), creating it empty when absent, and narrows
/// its -wal, -shm and -journal files when an older build left them wider: the store holds
/// password and token hashes. SQLite gives every -wal, -shm and -journal file it creates the mode
/// of the database file (os_unix.c, findCreateFileMode), so they stay 0600 whatever the umask.
/// Nothing to do for ":memory:" or a URI file name.
core::Result<void> MakeOwnerOnly(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.starts_with("file:")) return {};
  auto fail = [&](const std::string& file) {
    return core::Fail(ErrorCode::kUnavailable, "store_unavailable",
                      "cannot make " + file + " owner-only (0600): " + std::strerror(errno));
  };
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return fail(path);
  const bool narrowed = ::fchmod(fd, 0600) == 0;
  ::close(fd);
  if (!narrowed) return fail(path);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string file = path + suffix;
    if (::chmod(file.c_str(), 0600) != 0 && errno != ENOENT) return fail(file);
  }
  return {};
}

/// The first column of the first row `sql` returns ("" when none or on an error).
std::string PragmaText(sqlite3* db, const char* sql) {
  std::string out;
  sqlite3_exec(
      db, sql,
      [](void* arg, int n, char** values, char**) {
        if (n > 0 && values[0] != nullptr) *static_cast<std::string*>(arg) = values[0];
        return 0;
      },
      &out, nullptr);
  return out;
}

}  // namespace

/// The background WAL checkpointer (SqliteOptions::background_checkpoint). Commits on the pooled
/// connections report through the WAL hook (OnCommit, called by SQLite after the commit released
/// the write lock); a thread with a connection of its own checkpoints PASSIVE every interval when
/// something was committed or the last checkpoint was incomplete, at once when a commit leaves
/// `checkpoint_wake_pages` frames not yet copied, and tries TRUNCATE when the -wal file is larger
/// than `wal_truncate_bytes`.
struct SqliteDatabase::Checkpointer {
  explicit Checkpointer(const SqliteOptions& o) : options(o), wake_at(o.checkpoint_wake_pages) {}
  ~Checkpointer() { Stop(); }

  /// sqlite3_wal_hook callback: `pages` is the number of frames in the WAL after the commit.
  static int OnCommit(void* arg, sqlite3* conn, const char*, int pages) {
    auto* self = static_cast<Checkpointer*>(arg);
    self->dirty.store(true, std::memory_order_relaxed);
    // The thread has fallen far behind (a busy machine leaves it no CPU while writers commit):
    // the writer restarts the WAL itself rather than let it grow without bound.
    if (int64_t{pages} * self->frame_bytes.load(std::memory_order_relaxed) >
        2 * self->options.wal_truncate_bytes) {
      self->WriterRestart(conn);
      return SQLITE_OK;
    }
    if (pages >= self->wake_at.load(std::memory_order_relaxed) &&
        !self->wake_pending.exchange(true)) {
      {
        std::lock_guard lock(self->mu);
        self->woken = true;
      }
      self->cv.notify_one();
    }
    return SQLITE_OK;
  }

  /// A RESTART checkpoint on the connection `conn` that just committed (called from its WAL
  /// hook, as SQLite's own auto-checkpoint is), with its busy handler off for the attempt: it
  /// never waits for readers or another writer; when one is in the way it gives up, and the next
  /// commit over the bound tries again.
  void WriterRestart(sqlite3* conn) {
    sqlite3_busy_timeout(conn, 0);
    int log = -1, copied = -1;
    const int rc =
        sqlite3_wal_checkpoint_v2(conn, nullptr, SQLITE_CHECKPOINT_RESTART, &log, &copied);
    sqlite3_busy_timeout(conn, options.busy_timeout_ms);
    if (rc != SQLITE_OK) return;
    std::lock_guard lock(stats_mu);
    ++stats.restarted;
    ++stats.by_writer;
  }

  /// Opens the checkpointer's connection on `path` (the pool's database file) and starts the
  /// thread.
  core::Result<void> Start(const std::string& path, int busy_timeout_ms) {
    int rc =
        sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
      return core::Fail(ErrorCode::kUnavailable, "store_unavailable",
                        "cannot open the WAL checkpointer's connection to " + path + ": " + msg);
    }
    // A connection learns that the file is in WAL mode when it first reads it.
    sqlite3_busy_timeout(db, busy_timeout_ms);
    if (PragmaText(db, "PRAGMA journal_mode=WAL") != "wal") {
      return core::Fail(ErrorCode::kUnavailable, "store_unavailable",
                        "the WAL checkpointer's connection to " + path + " is not in WAL mode");
    }
    // Only the TRUNCATE attempt waits on the busy handler (PASSIVE never does).
    // Polls every 100 us (SQLite's own handler sleeps 1, 2, 5, … ms between tries).
    sqlite3_busy_handler(
        db,
        [](void* arg, int tries) {
          auto* self = static_cast<Checkpointer*>(arg);
          if (tries * 100 >= self->options.checkpoint_busy_timeout_ms * 1000) return 0;
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          return 1;
        },
        this);
    wal_path = sqlite3_filename_wal(sqlite3_db_filename(db, "main"));
    // A WAL frame is a 24-byte header and one page.
    frame_bytes.store(std::atoll(PragmaText(db, "PRAGMA page_size").c_str()) + 24,
                      std::memory_order_relaxed);
    {
      std::lock_guard lock(stats_mu);
      stats.running = true;
    }
    thread = std::thread([this] { Run(); });
    return {};
  }

  /// Stops and joins the thread, checkpoints once more (PASSIVE) and closes the connection.
  void Stop() {
    if (thread.joinable()) {
      {
        std::lock_guard lock(mu);
        stop = true;
      }
      cv.notify_one();
      thread.join();
      Checkpoint();
    }
    if (db != nullptr) sqlite3_close_v2(db);
    db = nullptr;
    std::lock_guard lock(stats_mu);
    stats.running = false;
  }

  /// Called before a write transaction begins: waits while a TRUNCATE attempt runs (at most
  /// its busy timeout plus the checkpoint itself).
  void WaitForTruncate() {
    if (!truncating.load()) return;
    std::unique_lock lock(mu);
    gate.wait(lock, [&] { return !truncating.load(); });
  }

  SqliteCheckpointStats Stats() const {
    std::lock_guard lock(stats_mu);
    return stats;
  }

 private:
  using SteadyClock = std::chrono::steady_clock;

  void Run() {
    const auto interval = std::chrono::milliseconds(std::max(1, options.checkpoint_interval_ms));
    // A commit's wake never starts checkpoints closer together than this (a reader that keeps
    // the WAL from restarting would otherwise wake it on every commit).
    const auto min_gap = std::min<SteadyClock::duration>(interval, std::chrono::milliseconds(5));
    auto last = SteadyClock::now() - min_gap;
    bool pending = false;  // the last checkpoint left frames behind, or the WAL is too large
    std::unique_lock lock(mu);
    while (!stop) {
      cv.wait_for(lock, interval, [&] { return stop || woken; });
      if (stop) break;
      const bool by_wake = woken;
      woken = false;
      if (by_wake && cv.wait_until(lock, last + min_gap, [&] { return stop; })) break;
      lock.unlock();
      const bool committed = dirty.exchange(false, std::memory_order_relaxed);
      if (committed || pending || by_wake) {
        pending = Checkpoint();
        last = SteadyClock::now();
      }
      wake_pending.store(false);
      lock.lock();
    }
  }

  /// One PASSIVE checkpoint, then a TRUNCATE or RESTART attempt when the WAL is over the bound
  /// (see SqliteOptions::wal_truncate_bytes). Returns whether work is left: frames not copied,
  /// or the WAL or its file still over the bound.
  bool Checkpoint() {
    int log = -1, copied = -1;
    int rc = sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
    bool left = Record(rc, "PASSIVE", log, copied);
    // Wake again when checkpoint_wake_pages more frames wait; after a complete checkpoint the
    // next writer restarts the WAL at frame 0.
    const int64_t done = rc == SQLITE_OK && copied == log ? 0 : std::max(0, copied);
    wake_at.store(done + options.checkpoint_wake_pages, std::memory_order_relaxed);
    const int64_t wal_bytes =
        std::max(0, log) *
        frame_bytes.load(std::memory_order_relaxed);  // frames in use, not the file
    std::error_code ec;
    const auto file = std::filesystem::file_size(wal_path, ec);
    const auto size = ec ? 0 : static_cast<int64_t>(file);
    // The file is over the bound and everything in it is copied: truncate it to give the disk
    // back, but only when nothing was committed during the PASSIVE (the hook sets `dirty`):
    // ftruncate of a large file takes 100+ ms, and writers wait for it.
    if (size > options.wal_truncate_bytes && rc == SQLITE_OK && copied == log &&
        !dirty.load(std::memory_order_relaxed)) {
      return !Exclusive(SQLITE_CHECKPOINT_TRUNCATE, "TRUNCATE", size);
    }
    // The WAL in use is over the bound (writers that seldom leave it idle when a checkpoint
    // completes, so it never restarts at frame 0, or readers that kept checkpoints short): a
    // RESTART copies what is left (holding the write lock meanwhile) and makes the next writer
    // start the WAL over, so the file stops growing. Tried once PASSIVE, which holds no lock
    // writers need, has caught up to within checkpoint_wake_pages frames, or regardless at twice
    // the bound.
    const bool caught_up = rc == SQLITE_OK && log - copied <= options.checkpoint_wake_pages;
    if (wal_bytes > options.wal_truncate_bytes &&
        (caught_up || wal_bytes > 2 * options.wal_truncate_bytes)) {
      return !Exclusive(SQLITE_CHECKPOINT_RESTART, "RESTART", size) ||
             size > options.wal_truncate_bytes;
    }
    return left || wal_bytes > options.wal_truncate_bytes || size > options.wal_truncate_bytes;
  }

  /// A RESTART or TRUNCATE checkpoint with this process's new writers held back (all of
  /// gpuwerk's writers: a steady stream would otherwise rarely leave it a gap). Returns whether
  /// it finished.
  bool Exclusive(int mode, const char* name, int64_t size) {
    int log = -1, copied = -1;
    truncating.store(true);
    const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, mode, &log, &copied);
    {
      std::lock_guard lock(mu);
      truncating.store(false);
    }
    gate.notify_all();
    Record(rc, name, log, copied);
    if (rc == SQLITE_OK) {
      std::lock_guard lock(stats_mu);
      ++(mode == SQLITE_CHECKPOINT_TRUNCATE ? stats.truncated : stats.restarted);
      return true;
    }
    const auto now = SteadyClock::now();
    if (now - last_size_warning >= std::chrono::minutes(1)) {
      last_size_warning = now;
      spdlog::warn(
          "store: the WAL file {} is {} bytes (bound {}) and a {} checkpoint could not finish "
          "({}): readers or writers kept it busy; trying again",
          wal_path, size, options.wal_truncate_bytes, name, sqlite3_errstr(rc));
    }
    return false;
  }

  /// Counts one checkpoint call; returns whether it left work behind.
  bool Record(int rc, const char* mode, int log, int copied) {
    std::lock_guard lock(stats_mu);
    if (rc == SQLITE_OK) {
      if (failing) spdlog::info("store: WAL checkpoints of {} succeed again", wal_path);
      failing = false;
      if (std::string_view(mode) == "PASSIVE") ++stats.passive;
      stats.last_wal_frames = log;
      stats.last_copied_frames = copied;
      return copied < log;
    }
    if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
      ++stats.busy;
      spdlog::debug("store: {} WAL checkpoint busy, trying again later", mode);
    } else {
      ++stats.failed;
      // Once per change of state: a full disk fails every look (4 a second) until space is freed.
      if (!failing) {
        spdlog::warn("store: {} WAL checkpoint of {} failed: {}; trying again", mode, wal_path,
                     sqlite3_errmsg(db));
      }
      failing = true;
    }
    return true;
  }

  const SqliteOptions options;
  sqlite3* db = nullptr;
  std::string wal_path;
  std::atomic<int64_t> frame_bytes{4096 + 24};  // read by the pooled connections' WAL hook
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::condition_variable gate;           // writers waiting for a TRUNCATE attempt
  std::atomic<bool> truncating{false};    // a TRUNCATE attempt runs (cleared under mu)
  bool stop = false;                      // guarded by mu
  bool woken = false;                     // guarded by mu
  std::atomic<bool> dirty{false};         // a commit since the last checkpoint
  std::atomic<bool> wake_pending{false};  // a commit woke the thread; no more wakes until done
  std::atomic<int64_t> wake_at;           // frames in the WAL at which a commit wakes it
  SteadyClock::time_point last_size_warning{};
  mutable std::mutex stats_mu;
  SqliteCheckpointStats stats;  // guarded by stats_mu
  bool failing = false;         // the last checkpoint failed (not busy); guarded by stats_mu
};

struct SqliteDatabase::Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Connection>> free;
  std::string path;               // the database file, for log lines
  std::atomic<bool> full{false};  // the last write failed for want of space

  /// The error for `rc` from `what` on `db`: StorageFullError for SQLITE_FULL (warned once per
  /// change of state, with SQLite's own words), else SqliteError.
  core::Error ErrorOf(sqlite3* db, int rc, std::string_view what) {
    if ((rc & 0xff) != SQLITE_FULL) return SqliteError(db, rc, what);
    if (!full.exchange(true)) {
      spdlog::warn(
          "store: {} on {} failed: {}; writes answer 503 storage_full until there is space again",
          what, path, sqlite3_errmsg(db));
    }
    return StorageFullError();
  }
  /// A write committed: says so once when writes had been failing for want of space.
  void Wrote() {
    if (full.load(std::memory_order_relaxed) && full.exchange(false)) {
      spdlog::info("store: writes to {} succeed again", path);
    }
  }

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

class SqliteTransaction final : public Transaction, public internal::RawStatements {
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
    auto r = Run(sql, Span(params), &rows, nullptr);
    if (!r) return std::unexpected(r.error());
    return rows;
  }

  core::Result<std::vector<std::vector<Value>>> QueryRaw(std::string_view sql,
                                                         std::span<const Value> params) override {
    std::vector<std::vector<Value>> rows;
    GPUWERK_TRY(Run(sql, params, nullptr, &rows));
    return rows;
  }

  core::Result<int64_t> ExecRaw(std::string_view sql, std::span<const Value> params) override {
    GPUWERK_TRY(Run(sql, params, nullptr, nullptr));
    return static_cast<int64_t>(sqlite3_changes(conn_->db));
  }

  core::Result<int64_t> Exec(std::string_view sql, std::initializer_list<Value> params) override {
    auto r = Run(sql, Span(params), nullptr, nullptr);
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
    const bool wrote = sqlite3_txn_state(conn_->db, nullptr) == SQLITE_TXN_WRITE;
    int rc = conn_->Simple("COMMIT");
    if (rc != SQLITE_OK) return std::unexpected(pool_->ErrorOf(conn_->db, rc, "commit"));
    done_ = true;
    if (wrote) pool_->Wrote();
    return {};
  }

 private:
  static std::span<const Value> Span(std::initializer_list<Value> params) {
    return std::span<const Value>(params.begin(), params.size());
  }

  /// Runs `sql`; its rows into `rows` (by name) or `raw` (values only), or nowhere.
  core::Result<void> Run(std::string_view sql, std::span<const Value> params,
                         std::vector<Row>* rows, std::vector<std::vector<Value>>* raw) {
    sqlite3* db = conn_->db;
    sqlite3_stmt* stmt = nullptr;
    auto it = conn_->statements.find(sql);
    if (it != conn_->statements.end()) {
      stmt = it->second;
    } else {
      int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) return std::unexpected(pool_->ErrorOf(db, rc, "prepare"));
      conn_->statements.emplace(std::string(sql), stmt);
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
      if (rc != SQLITE_OK) return std::unexpected(pool_->ErrorOf(db, rc, "bind"));
      ++idx;
    }
    ColumnNames* names = nullptr;  // looked up at the first row, once per statement run
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        auto err = pool_->ErrorOf(db, sqlite3_extended_errcode(db), "step");
        sqlite3_reset(stmt);
        return std::unexpected(err);
      }
      if (!rows && !raw) continue;
      int n = sqlite3_column_count(stmt);
      if (rows && !names) {
        names = &conn_->columns[stmt];
        if (!*names) {
          auto made = std::make_shared<std::vector<std::string>>();
          made->reserve(n);
          for (int c = 0; c < n; ++c) made->emplace_back(sqlite3_column_name(stmt, c));
          *names = std::move(made);
        }
      }
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
      if (raw) {
        raw->push_back(std::move(values));
      } else {
        rows->emplace_back(std::move(values), *names);
      }
    }
    sqlite3_reset(stmt);
    return {};
  }

  SqliteDatabase::Pool* pool_;
  std::unique_ptr<Connection> conn_;
  bool done_ = false;
};

}  // namespace

SqliteDatabase::SqliteDatabase(std::unique_ptr<Pool> pool,
                               std::unique_ptr<Checkpointer> checkpointer)
    : pool_(std::move(pool)), checkpointer_(std::move(checkpointer)) {}

SqliteDatabase::~SqliteDatabase() {
  if (!checkpointer_) return;
  // Every connection is back in the pool: no commit can call the hook any more.
  for (auto& conn : pool_->free) sqlite3_wal_hook(conn->db, nullptr, nullptr);
  checkpointer_->Stop();
}

SqliteCheckpointStats SqliteDatabase::CheckpointStats() const {
  return checkpointer_ ? checkpointer_->Stats() : SqliteCheckpointStats{};
}

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
  GPUWERK_TRY(MakeOwnerOnly(options.path));
  auto pool = std::make_unique<Pool>();
  pool->path = options.path;
  std::unique_ptr<Checkpointer> checkpointer;
  if (options.background_checkpoint) checkpointer = std::make_unique<Checkpointer>(options);
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
    // The background checkpointer needs a WAL file database (":memory:" stays "memory").
    if (i == 0 && checkpointer && PragmaText(conn->db, "PRAGMA journal_mode") != "wal") {
      checkpointer.reset();
    }
    if (checkpointer) {
      if (sqlite3_exec(conn->db, "PRAGMA wal_autocheckpoint=0", nullptr, nullptr, nullptr) !=
          SQLITE_OK) {
        return core::Fail(
            ErrorCode::kUnavailable, "store_unavailable",
            "cannot configure SQLite database " + options.path + ": " + sqlite3_errmsg(conn->db));
      }
      sqlite3_wal_hook(conn->db, &Checkpointer::OnCommit, checkpointer.get());
    }
    pool->free.push_back(std::move(conn));
  }
  if (checkpointer) {
    GPUWERK_TRY(checkpointer->Start(sqlite3_db_filename(pool->free.front()->db, "main"),
                                    options.busy_timeout_ms));
  }
  return std::unique_ptr<SqliteDatabase>(
      new SqliteDatabase(std::move(pool), std::move(checkpointer)));
}

core::Result<std::unique_ptr<Transaction>> SqliteDatabase::Begin(TxMode mode) {
  if (checkpointer_ && mode == TxMode::kWrite) checkpointer_->WaitForTruncate();
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
