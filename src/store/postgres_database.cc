#include "store/postgres_database.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "store/internal/raw_statements.h"

namespace gpuwerk::store {
namespace {

using core::ErrorCode;

// Type OIDs (src/include/catalog/pg_type.dat): stable across PostgreSQL versions.
constexpr Oid kBoolOid = 16;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kOidOid = 26;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kNumericOid = 1700;
constexpr Oid kTextOid = 25;

/// A PGresult freed when it goes out of scope.
struct Result {
  PGresult* res = nullptr;
  explicit Result(PGresult* r) : res(r) {}
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  ~Result() {
    if (res) PQclear(res);
  }
  ExecStatusType Status() const { return res ? PQresultStatus(res) : PGRES_FATAL_ERROR; }
  bool Ok() const { return Status() == PGRES_COMMAND_OK || Status() == PGRES_TUPLES_OK; }
  std::string SqlState() const {
    const char* s = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    return s ? s : "";
  }
};

/// A statement prepared on one connection.
struct Prepared {
  std::string name;   // "g1", "g2", …
  int params = 0;     // placeholders in the statement
  ColumnNames names;  // the result's column names, made at its first result
};

/// One connection with its prepared statements, keyed by parameter types and SQL.
struct Connection {
  PGconn* conn = nullptr;
  std::unordered_map<std::string, Prepared> statements;
  int next_statement = 0;

  ~Connection() {
    if (conn) PQfinish(conn);
  }
  bool Broken() const { return conn == nullptr || PQstatus(conn) != CONNECTION_OK; }
  /// The connection's own words about the last failure, trimmed.
  std::string Message() const {
    std::string m = conn ? PQerrorMessage(conn) : "no connection";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  }
};

/// What the server said about a failed statement: its primary message (never its DETAIL, which
/// quotes the row's values), or the connection's message when there is no result.
std::string PrimaryMessage(const Result& r, const Connection& c) {
  const char* primary = r.res ? PQresultErrorField(r.res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  if (primary && *primary) return primary;
  return c.Message();
}

void IgnoreNotice(void*, const char*) {}

core::Error Unavailable(std::string message) {
  return core::Error(ErrorCode::kUnavailable, "store_unavailable", std::move(message));
}

/// Sets up a new connection: the session settings every transaction relies on.
core::Result<void> Configure(Connection& c, const PostgresOptions& options) {
  PQsetNoticeProcessor(c.conn, &IgnoreNotice, nullptr);
  if (PQserverVersion(c.conn) < 130000) {
    return std::unexpected(Unavailable("the PostgreSQL server is version " +
                                       std::to_string(PQserverVersion(c.conn)) +
                                       "; gpuwerk needs PostgreSQL 13 or newer"));
  }
  const std::string settings = "SET lock_timeout = " + std::to_string(options.lock_timeout_ms) +
                               "; SET client_min_messages = warning; SET TIME ZONE 'UTC'";
  Result r(PQexec(c.conn, settings.c_str()));
  if (!r.Ok())
    return std::unexpected(Unavailable("cannot set up the PostgreSQL connection: " + c.Message()));
  return {};
}

/// Connects one connection to `options.url`.
core::Result<std::unique_ptr<Connection>> Connect(const PostgresOptions& options) {
  auto c = std::make_unique<Connection>();
  const char* keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* values[] = {options.url.c_str(), "gpuwerk", nullptr};
  c->conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (c->Broken()) {
    return std::unexpected(Unavailable("cannot connect to PostgreSQL at " +
                                       RedactDatabaseUrl(options.url) + ": " + c->Message()));
  }
  GPUWERK_TRY(Configure(*c, options));
  return c;
}

/// The Value of one result field, read by its column's type.
Value FieldValue(PGresult* res, int row, int col) {
  if (PQgetisnull(res, row, col)) return kNull;
  const char* p = PQgetvalue(res, row, col);
  const size_t n = static_cast<size_t>(PQgetlength(res, row, col));
  switch (PQftype(res, col)) {
    case kInt8Oid:
    case kInt4Oid:
    case kInt2Oid:
    case kOidOid: {
      int64_t v = 0;
      std::from_chars(p, p + n, v);
      return v;
    }
    case kNumericOid: {
      // SUM and AVG of BIGINT are NUMERIC: integral ones read as integers, as SQLite's do.
      int64_t v = 0;
      auto [end, ec] = std::from_chars(p, p + n, v);
      if (ec == std::errc() && end == p + n) return v;
      [[fallthrough]];
    }
    case kFloat4Oid:
    case kFloat8Oid: {
      double d = 0;
      std::from_chars(p, p + n, d);
      return d;
    }
    case kBoolOid:
      return int64_t{n > 0 && p[0] == 't' ? 1 : 0};
    default:
      return std::string(p, n);
  }
}

}  // namespace

std::string PostgresPlaceholders(std::string_view sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  size_t i = 0;
  while (i < sql.size()) {
    const char ch = sql[i];
    if (ch == '\'' || ch == '"') {  // a literal or a quoted identifier; a doubled quote stays in
      const size_t start = i++;
      while (i < sql.size()) {
        if (sql[i] == ch) {
          if (i + 1 < sql.size() && sql[i + 1] == ch) {
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        ++i;
      }
      out.append(sql.substr(start, i - start));
    } else if (ch == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      const size_t end = sql.find('\n', i);
      const size_t stop = end == std::string_view::npos ? sql.size() : end;
      out.append(sql.substr(i, stop - i));
      i = stop;
    } else if (ch == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      const size_t end = sql.find("*/", i + 2);
      const size_t stop = end == std::string_view::npos ? sql.size() : end + 2;
      out.append(sql.substr(i, stop - i));
      i = stop;
    } else if (ch == '?') {
      out += '$';
      out += std::to_string(++n);
      ++i;
    } else {
      out += ch;
      ++i;
    }
  }
  if (count) *count = n;
  return out;
}

std::string RedactDatabaseUrl(std::string_view url) {
  std::string out(url);
  // postgresql://user:password@host → postgresql://user:***@host
  if (const size_t scheme = out.find("://"); scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t at = out.find('@', start);
    const size_t slash = out.find('/', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // …?password=secret&… → …?password=***&…
  for (size_t pos = out.find("password="); pos != std::string::npos;
       pos = out.find("password=", pos + 1)) {
    if (pos > 0 && out[pos - 1] != '?' && out[pos - 1] != '&' && out[pos - 1] != ' ') continue;
    const size_t value = pos + std::strlen("password=");
    const size_t end = out.find_first_of("& ", value);
    out.replace(value, (end == std::string::npos ? out.size() : end) - value, "***");
  }
  return out;
}

struct PostgresDatabase::Pool {
  PostgresOptions options;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Connection>> free;
  std::atomic<bool> full{false};  // the last write failed for want of space

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

  /// Reconnects a connection the server or the network closed (its prepared statements are
  /// gone with it). Errors: store_busy, so that Run tries again later.
  core::Result<void> Heal(Connection& c) {
    if (!c.Broken()) return {};
    c.statements.clear();
    if (c.conn == nullptr) {
      auto fresh = Connect(options);
      if (!fresh) return std::unexpected(BusyError(fresh.error().message));
      std::swap(c.conn, (*fresh)->conn);
      return {};
    }
    PQreset(c.conn);
    if (c.Broken()) {
      return std::unexpected(BusyError("cannot reconnect to PostgreSQL at " +
                                       RedactDatabaseUrl(options.url) + ": " + c.Message()));
    }
    spdlog::info("store: reconnected to PostgreSQL at {}", RedactDatabaseUrl(options.url));
    auto configured = Configure(c, options);
    if (!configured) return std::unexpected(BusyError(configured.error().message));
    return {};
  }

  /// The store error for a failed statement `what` (see PostgresDatabase's docstring).
  core::Error ErrorOf(const Result& r, const Connection& c, std::string_view what,
                      bool committing) {
    const std::string state = r.SqlState();
    std::string msg = std::string(what) + ": " + PrimaryMessage(r, c);
    if (c.Broken() || state.starts_with("08") || state == "57P01" || state == "57P02" ||
        state == "57P03") {
      if (committing) {
        return Unavailable(msg +
                           " (the connection ended during COMMIT: the transaction may or "
                           "may not have been committed)");
      }
      return BusyError(std::move(msg));
    }
    if (state == "40001" || state == "40P01" || state == "55P03") return BusyError(std::move(msg));
    if (state.starts_with("23")) return ConstraintViolationError(state == "23505", std::move(msg));
    if (state == "53100") {
      if (!full.exchange(true)) {
        spdlog::warn("store: {} failed: {}; writes answer 503 storage_full until there is space",
                     what, PrimaryMessage(r, c));
      }
      return StorageFullError();
    }
    return core::Error(ErrorCode::kInternal, "store_error", std::move(msg));
  }

  void Wrote() {
    if (full.load(std::memory_order_relaxed) && full.exchange(false)) {
      spdlog::info("store: writes to PostgreSQL succeed again");
    }
  }
};

namespace {

class PostgresTransaction final : public Transaction, public internal::RawStatements {
 public:
  PostgresTransaction(PostgresDatabase::Pool* pool, std::unique_ptr<Connection> conn, bool write)
      : pool_(pool), conn_(std::move(conn)), write_(write) {}

  ~PostgresTransaction() override {
    if (!done_ && !conn_->Broken()) Result r(PQexec(conn_->conn, "ROLLBACK"));
    pool_->Give(std::move(conn_));
  }

  core::Result<std::vector<Row>> Query(std::string_view sql,
                                       std::initializer_list<Value> params) override {
    std::vector<Row> rows;
    GPUWERK_TRY(Run(sql, Span(params), &rows, nullptr, nullptr));
    return rows;
  }

  core::Result<std::vector<std::vector<Value>>> QueryRaw(std::string_view sql,
                                                         std::span<const Value> params) override {
    std::vector<std::vector<Value>> rows;
    GPUWERK_TRY(Run(sql, params, nullptr, &rows, nullptr));
    return rows;
  }

  core::Result<int64_t> ExecRaw(std::string_view sql, std::span<const Value> params) override {
    int64_t changed = 0;
    GPUWERK_TRY(Run(sql, params, nullptr, nullptr, &changed));
    return changed;
  }

  core::Result<int64_t> Exec(std::string_view sql, std::initializer_list<Value> params) override {
    int64_t changed = 0;
    GPUWERK_TRY(Run(sql, Span(params), nullptr, nullptr, &changed));
    return changed;
  }

  core::Result<void> ExecScript(std::string_view sql) override {
    const std::string s(sql);
    Result r(PQexec(conn_->conn, s.c_str()));
    if (!r.Ok()) {
      auto err = pool_->ErrorOf(r, *conn_, "script", false);
      if (err.code == ErrorCode::kInternal) {
        return core::Fail(ErrorCode::kInternal, "store_error", "script failed: " + err.message);
      }
      return std::unexpected(err);
    }
    return {};
  }

  core::Result<void> Commit() override {
    Result r(PQexec(conn_->conn, "COMMIT"));
    if (!r.Ok()) return std::unexpected(pool_->ErrorOf(r, *conn_, "commit", true));
    // COMMIT of a transaction an error had aborted answers ROLLBACK instead of failing.
    const char* tag = PQcmdStatus(r.res);
    if (tag && std::string_view(tag) == "ROLLBACK") {
      done_ = true;
      return core::Internal("commit: the transaction had failed and was rolled back");
    }
    done_ = true;
    if (write_) pool_->Wrote();
    return {};
  }

 private:
  static std::span<const Value> Span(std::initializer_list<Value> params) {
    return std::span<const Value>(params.begin(), params.size());
  }

  /// Runs `sql`; its rows into `rows` (by name) or `raw` (values only), or nowhere; the number
  /// of rows it changed into `changed`.
  core::Result<void> Run(std::string_view sql, std::span<const Value> params,
                         std::vector<Row>* rows, std::vector<std::vector<Value>>* raw,
                         int64_t* changed) {
    // One prepared statement per SQL text and parameter types: a NULL goes untyped (the server
    // infers it), so `?` that is NULL once and an integer once are two statements.
    std::string key;
    key.reserve(params.size() + 1 + sql.size());
    std::vector<Oid> types;
    types.reserve(params.size());
    std::vector<std::string> texts;
    texts.reserve(params.size());
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const Value& v : params) {
      if (auto* n = std::get_if<int64_t>(&v)) {
        key += 'i';
        types.push_back(kInt8Oid);
        texts.push_back(std::to_string(*n));
      } else if (auto* d = std::get_if<double>(&v)) {
        key += 'd';
        types.push_back(kFloat8Oid);
        char buf[64];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *d);
        texts.emplace_back(buf, ec == std::errc() ? end : buf);
      } else if (auto* s = std::get_if<std::string>(&v)) {
        key += 't';
        types.push_back(kTextOid);
        texts.push_back(*s);
      } else {
        key += 'n';
        types.push_back(0);
        texts.emplace_back();
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      values.push_back(types[i] == 0 ? nullptr : texts[i].c_str());
    }
    key += '\n';
    key.append(sql);

    auto it = conn_->statements.find(key);
    if (it == conn_->statements.end()) {
      Prepared p;
      const std::string text = PostgresPlaceholders(sql, &p.params);
      if (static_cast<size_t>(p.params) != params.size()) {
        return core::Internal("statement expects " + std::to_string(p.params) +
                              " parameters, got " + std::to_string(params.size()));
      }
      p.name = "g" + std::to_string(++conn_->next_statement);
      Result r(PQprepare(conn_->conn, p.name.c_str(), text.c_str(), p.params, types.data()));
      if (!r.Ok()) return std::unexpected(pool_->ErrorOf(r, *conn_, "prepare", false));
      it = conn_->statements.emplace(std::move(key), std::move(p)).first;
    }
    Prepared& p = it->second;
    Result r(PQexecPrepared(conn_->conn, p.name.c_str(), p.params, values.data(), nullptr, nullptr,
                            /*resultFormat=*/0));
    if (!r.Ok()) return std::unexpected(pool_->ErrorOf(r, *conn_, "step", false));
    if (changed) {
      const char* tuples = PQcmdTuples(r.res);
      int64_t n = 0;
      if (tuples && *tuples) std::from_chars(tuples, tuples + std::strlen(tuples), n);
      *changed = n;
    }
    if ((!rows && !raw) || r.Status() != PGRES_TUPLES_OK) return {};
    const int ncols = PQnfields(r.res);
    const int nrows = PQntuples(r.res);
    if (raw) {
      raw->reserve(nrows);
      for (int row = 0; row < nrows; ++row) {
        std::vector<Value> v;
        v.reserve(ncols);
        for (int c = 0; c < ncols; ++c) v.push_back(FieldValue(r.res, row, c));
        raw->push_back(std::move(v));
      }
      return {};
    }
    if (!p.names) {
      auto made = std::make_shared<std::vector<std::string>>();
      made->reserve(ncols);
      for (int c = 0; c < ncols; ++c) made->emplace_back(PQfname(r.res, c));
      p.names = std::move(made);
    }
    rows->reserve(nrows);
    for (int row = 0; row < nrows; ++row) {
      std::vector<Value> v;
      v.reserve(ncols);
      for (int c = 0; c < ncols; ++c) v.push_back(FieldValue(r.res, row, c));
      rows->emplace_back(std::move(v), p.names);
    }
    return {};
  }

  PostgresDatabase::Pool* pool_;
  std::unique_ptr<Connection> conn_;
  bool write_;
  bool done_ = false;
};

}  // namespace

PostgresDatabase::PostgresDatabase(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}
PostgresDatabase::~PostgresDatabase() = default;

core::Result<std::unique_ptr<PostgresDatabase>> PostgresDatabase::Open(
    const PostgresOptions& options) {
  auto pool = std::make_unique<Pool>();
  pool->options = options;
  for (int i = 0; i < std::max(1, options.pool_size); ++i) {
    GPUWERK_ASSIGN_OR_RETURN(auto conn, Connect(options));
    pool->free.push_back(std::move(conn));
  }
  return std::unique_ptr<PostgresDatabase>(new PostgresDatabase(std::move(pool)));
}

int PostgresDatabase::ConflictRetries() const { return pool_->options.conflict_retries; }

void PostgresDatabase::BeforeRetry(int attempt) {
  thread_local std::minstd_rand random(
      static_cast<unsigned>(std::hash<std::thread::id>()(std::this_thread::get_id())));
  const int cap_us = 1000 << std::min(attempt - 1, 6);  // 1, 2, 4 … 64 ms
  std::uniform_int_distribution<int> wait(0, cap_us);
  std::this_thread::sleep_for(std::chrono::microseconds(wait(random)));
}

core::Result<std::unique_ptr<Transaction>> PostgresDatabase::Begin(TxMode mode) {
  auto conn = pool_->Take();
  if (auto healed = pool_->Heal(*conn); !healed) {
    pool_->Give(std::move(conn));
    return std::unexpected(healed.error());
  }
  const char* begin = mode == TxMode::kWrite ? "BEGIN ISOLATION LEVEL SERIALIZABLE"
                                             : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
  Result r(PQexec(conn->conn, begin));
  if (!r.Ok()) {
    auto err = pool_->ErrorOf(r, *conn, "begin", false);
    pool_->Give(std::move(conn));
    return std::unexpected(err);
  }
  return std::unique_ptr<Transaction>(
      new PostgresTransaction(pool_.get(), std::move(conn), mode == TxMode::kWrite));
}

}  // namespace gpuwerk::store
