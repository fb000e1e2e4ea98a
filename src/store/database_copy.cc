// store::CopyDatabase: every table of one store into an empty one, on any pair of backends. The
// catalog SQL of each engine is here (docs/database.md: SQL that differs stays in store/); the
// tables themselves are only ever named by what the catalogs say.
#include "store/database_copy.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <span>

#include "core/encoding.h"
#include "core/strings.h"
#include "store/internal/raw_statements.h"
#include "store/leader_lease.h"
#include "store/sqlite_database.h"

namespace gpuwerk::store {
namespace {

using core::ErrorCode;

constexpr std::string_view kMigrationsTable = "schema_migrations";
constexpr std::string_view kLeasesTable = "leader_leases";
constexpr int64_t kPageRows = 500;

/// An identifier between double quotes (both engines), a quote in it doubled.
std::string Quote(std::string_view id) {
  std::string out = "\"";
  for (char c : id) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Join(const std::vector<std::string>& parts, std::string_view between) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += between;
    out += p;
  }
  return out;
}

std::string QuotedList(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += Quote(n);
  }
  return out;
}

ColumnKind KindOf(std::string declared) {
  std::transform(declared.begin(), declared.end(), declared.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (declared == "bigint" || declared == "integer" || declared == "int" || declared == "int8") {
    return ColumnKind::kBigint;
  }
  if (declared == "text") return ColumnKind::kText;
  return ColumnKind::kOther;
}

std::string_view KindName(ColumnKind kind) {
  switch (kind) {
    case ColumnKind::kBigint:
      return "BIGINT";
    case ColumnKind::kText:
      return "TEXT";
    case ColumnKind::kOther:
      break;
  }
  return "another type";
}

core::Error Mismatch(std::string message) {
  return core::Error(ErrorCode::kFailedPrecondition, "schema_mismatch", std::move(message));
}

/// The tables in foreign-key order (Kahn's algorithm; among the tables ready at once, by name).
core::Result<std::vector<TableShape>> InForeignKeyOrder(std::map<std::string, TableShape> tables) {
  std::vector<TableShape> ordered;
  std::set<std::string> done;
  while (!tables.empty()) {
    auto ready = std::find_if(tables.begin(), tables.end(), [&](const auto& entry) {
      return std::all_of(entry.second.references.begin(), entry.second.references.end(),
                         [&](const std::string& parent) {
                           return parent == entry.first || done.contains(parent) ||
                                  !tables.contains(parent);
                         });
    });
    if (ready == tables.end()) {
      std::vector<std::string> left;
      for (const auto& [name, shape] : tables) left.push_back(name);
      return core::Fail(Mismatch("the foreign keys of the tables " + Join(left, ", ") +
                                 " form a cycle: no order to copy them in"));
    }
    done.insert(ready->first);
    ordered.push_back(std::move(ready->second));
    tables.erase(ready);
  }
  return ordered;
}

core::Result<std::vector<TableShape>> ReadSqliteSchema(Transaction& tx) {
  std::map<std::string, TableShape> tables;
  GPUWERK_ASSIGN_OR_RETURN(auto names,
                           tx.Query("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                    "name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"));
  for (const Row& row : names) {
    TableShape shape;
    shape.name = row.Text(0);
    GPUWERK_ASSIGN_OR_RETURN(
        auto columns,
        tx.Query("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", {shape.name}));
    std::vector<std::pair<int64_t, std::string>> key;
    for (const Row& c : columns) {
      shape.columns.push_back(ColumnShape{.name = c.Text("name"),
                                          .kind = KindOf(c.Text("type")),
                                          .declared = c.Text("type"),
                                          .generated = false});
      if (c.Int("pk") > 0) key.emplace_back(c.Int("pk"), c.Text("name"));
    }
    std::sort(key.begin(), key.end());
    for (auto& [position, column] : key) shape.primary_key.push_back(std::move(column));
    GPUWERK_ASSIGN_OR_RETURN(auto parents, tx.Query("SELECT DISTINCT \"table\" AS parent FROM "
                                                    "pragma_foreign_key_list(?) ORDER BY parent",
                                                    {shape.name}));
    for (const Row& p : parents) shape.references.push_back(p.Text("parent"));
    tables.emplace(shape.name, std::move(shape));
  }
  return InForeignKeyOrder(std::move(tables));
}

core::Result<std::vector<TableShape>> ReadPostgresSchema(Transaction& tx) {
  std::map<std::string, TableShape> tables;
  GPUWERK_ASSIGN_OR_RETURN(auto names, tx.Query("SELECT table_name AS name FROM "
                                                "information_schema.tables WHERE table_schema = "
                                                "current_schema() AND table_type = 'BASE TABLE'"));
  for (const Row& row : names) {
    TableShape shape;
    shape.name = row.Text("name");
    tables.emplace(shape.name, std::move(shape));
  }
  GPUWERK_ASSIGN_OR_RETURN(
      auto columns,
      tx.Query("SELECT table_name AS t, column_name AS c, data_type AS type, "
               "CASE WHEN is_identity = 'YES' OR column_default LIKE 'nextval(%' THEN 1 ELSE 0 "
               "END AS generated FROM information_schema.columns WHERE table_schema = "
               "current_schema() ORDER BY table_name, ordinal_position"));
  for (const Row& c : columns) {
    auto table = tables.find(c.Text("t"));
    if (table == tables.end()) continue;  // a view's columns
    table->second.columns.push_back(ColumnShape{.name = c.Text("c"),
                                                .kind = KindOf(c.Text("type")),
                                                .declared = c.Text("type"),
                                                .generated = c.Int("generated") != 0});
  }
  GPUWERK_ASSIGN_OR_RETURN(
      auto keys,
      tx.Query("SELECT k.table_name AS t, k.column_name AS c FROM "
               "information_schema.table_constraints tc JOIN information_schema.key_column_usage "
               "k ON k.constraint_name = tc.constraint_name AND k.table_schema = "
               "tc.table_schema AND k.table_name = tc.table_name WHERE tc.constraint_type = "
               "'PRIMARY KEY' AND tc.table_schema = current_schema() ORDER BY k.table_name, "
               "k.ordinal_position"));
  for (const Row& k : keys) {
    auto table = tables.find(k.Text("t"));
    if (table != tables.end()) table->second.primary_key.push_back(k.Text("c"));
  }
  GPUWERK_ASSIGN_OR_RETURN(
      auto parents,
      tx.Query("SELECT DISTINCT child.relname AS t, parent.relname AS parent FROM pg_constraint c "
               "JOIN pg_class child ON child.oid = c.conrelid JOIN pg_class parent ON parent.oid "
               "= c.confrelid JOIN pg_namespace n ON n.oid = child.relnamespace WHERE c.contype "
               "= 'f' AND n.nspname = current_schema() ORDER BY t, parent"));
  for (const Row& p : parents) {
    auto table = tables.find(p.Text("t"));
    if (table != tables.end()) table->second.references.push_back(p.Text("parent"));
  }
  return InForeignKeyOrder(std::move(tables));
}

core::Result<std::vector<TableShape>> ReadSchemaIn(Transaction& tx, std::string_view backend) {
  return backend == "postgresql" ? ReadPostgresSchema(tx) : ReadSqliteSchema(tx);
}

const TableShape* Find(const std::vector<TableShape>& tables, std::string_view name) {
  for (const auto& t : tables) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> ColumnNames(const TableShape& table) {
  std::vector<std::string> names;
  for (const auto& c : table.columns) names.push_back(c.name);
  return names;
}

/// A value as an error message shows it (a row's key).
std::string Shown(const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return "NULL";
  if (auto* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (auto* d = std::get_if<double>(&v)) return std::to_string(*d);
  return "\"" + core::BoundedPrintable(std::get<std::string>(v), 64) + "\"";
}

/// The rows of `table` the migrations alone made (the scratch database's), as value lists over
/// `columns`.
struct Seed {
  std::vector<TableShape> tables;
  std::map<std::string, std::vector<std::vector<Value>>> rows;  ///< by table, every column
};

/// The schema and rows a database holds after the migrations alone: a scratch SQLite database in
/// memory, migrated. What an "empty" target may hold.
core::Result<Seed> MigrationSeed() {
  GPUWERK_ASSIGN_OR_RETURN(auto scratch, SqliteDatabase::Open(SqliteOptions{
                                             .path = ":memory:",
                                             .pool_size = 1,
                                             .background_checkpoint = false,
                                         }));
  GPUWERK_TRY(Migrate(*scratch));
  Seed seed;
  GPUWERK_ASSIGN_OR_RETURN(seed.tables, ReadSchema(*scratch));
  GPUWERK_TRY(scratch->Read([&](Transaction& tx) -> core::Result<void> {
    for (const auto& table : seed.tables) {
      if (table.name == kMigrationsTable) continue;
      GPUWERK_ASSIGN_OR_RETURN(auto* raw, internal::Raw(tx));
      GPUWERK_ASSIGN_OR_RETURN(
          seed.rows[table.name],
          raw->QueryRaw("SELECT " + QuotedList(ColumnNames(table)) + " FROM " + Quote(table.name),
                        {}));
    }
    return {};
  }));
  return seed;
}

/// The tables of `tables` (in `tx`) that hold rows the migrations did not write, as "name (N
/// rows)". `schema_migrations` is the migrations' own record: never counted.
core::Result<std::vector<std::string>> RowsBeyondSeed(Transaction& tx,
                                                      const std::vector<TableShape>& tables,
                                                      const Seed& seed) {
  std::vector<std::string> found;
  for (const auto& table : tables) {
    if (table.name == kMigrationsTable) continue;
    GPUWERK_ASSIGN_OR_RETURN(auto count,
                             tx.QueryOne("SELECT COUNT(*) AS n FROM " + Quote(table.name)));
    const int64_t n = count->Int("n");
    if (n == 0) continue;
    int64_t extra = n;
    auto seeded = seed.rows.find(table.name);
    const TableShape* seed_table = Find(seed.tables, table.name);
    if (seeded != seed.rows.end() && !seeded->second.empty() && seed_table) {
      // Compare on the columns both have (the target may be at an older version).
      std::vector<std::string> common;
      std::vector<size_t> seed_index;
      for (size_t i = 0; i < seed_table->columns.size(); ++i) {
        for (const auto& c : table.columns) {
          if (c.name == seed_table->columns[i].name) {
            common.push_back(c.name);
            seed_index.push_back(i);
          }
        }
      }
      std::vector<std::vector<Value>> unmatched;
      for (const auto& values : seeded->second) {
        std::vector<Value> projected;
        for (size_t i : seed_index) projected.push_back(values[i]);
        unmatched.push_back(std::move(projected));
      }
      GPUWERK_ASSIGN_OR_RETURN(auto* raw, internal::Raw(tx));
      GPUWERK_ASSIGN_OR_RETURN(
          auto rows,
          raw->QueryRaw("SELECT " + QuotedList(common) + " FROM " + Quote(table.name), {}));
      extra = 0;
      for (const auto& values : rows) {
        auto match = std::find(unmatched.begin(), unmatched.end(), values);
        if (match == unmatched.end()) {
          ++extra;
        } else {
          unmatched.erase(match);
        }
      }
    }
    if (extra > 0) {
      found.push_back(table.name + " (" + std::to_string(extra) +
                      (extra == 1 ? " row)" : " rows)"));
    }
  }
  return found;
}

/// Refuses a database a server runs on now (an unexpired leader lease).
core::Result<void> RefuseLeased(Database& db, const std::vector<TableShape>& tables,
                                std::string_view side) {
  const bool has_table = Find(tables, kLeasesTable) != nullptr;
  GPUWERK_ASSIGN_OR_RETURN(auto held, db.Read([&](Transaction& tx) {
    return LeaderLease::Unexpired(tx, DatabaseClock(db.Backend()), has_table);
  }));
  if (held.empty()) return {};
  const auto& lease = held.front();
  return core::Fail(
      ErrorCode::kFailedPrecondition, "database_in_use",
      "a gpuwerk server runs on the " + std::string(side) +
          " database: " + core::BoundedPrintable(lease.state.holder, 128) + " holds its " +
          lease.name + " lease for another " +
          std::to_string((lease.state.expires_at_ms - lease.state.now_ms + 999) / 1000) +
          " s; stop every server on it first (a server killed without stopping "
          "gives its lease up when it runs out)");
}

/// Same tables, same columns in the same order and of the same kinds, every kind one the copier
/// converts.
core::Result<void> CompareSchemas(const std::vector<TableShape>& source,
                                  const std::vector<TableShape>& target) {
  for (const auto& t : source) {
    if (!Find(target, t.name)) {
      return core::Fail(Mismatch("the table " + t.name + " is in the source only"));
    }
  }
  for (const auto& t : target) {
    if (!Find(source, t.name)) {
      return core::Fail(Mismatch("the table " + t.name + " is in the target only"));
    }
  }
  for (const auto& t : target) {
    const TableShape* s = Find(source, t.name);
    for (const auto& c : s->columns) {
      if (c.kind == ColumnKind::kOther) {
        return core::Fail(Mismatch("the column " + t.name + "." + c.name + " is of type " +
                                   c.declared + ", which the copy does not convert"));
      }
    }
    for (size_t i = 0; i < std::max(s->columns.size(), t.columns.size()); ++i) {
      if (i >= t.columns.size()) {
        return core::Fail(
            Mismatch("the column " + t.name + "." + s->columns[i].name + " is in the source only"));
      }
      if (i >= s->columns.size()) {
        return core::Fail(
            Mismatch("the column " + t.name + "." + t.columns[i].name + " is in the target only"));
      }
      const auto& sc = s->columns[i];
      const auto& tc = t.columns[i];
      if (sc.name != tc.name) {
        return core::Fail(Mismatch("the table " + t.name + "'s column " + std::to_string(i + 1) +
                                   " is " + sc.name + " in the source, " + tc.name +
                                   " in the target"));
      }
      if (sc.kind != tc.kind) {
        return core::Fail(Mismatch("the column " + t.name + "." + sc.name + " is " + sc.declared +
                                   " in the source, " + tc.declared + " in the target"));
      }
    }
  }
  return {};
}

/// Refuses a value that `column` cannot take as it is.
core::Result<void> CheckValue(const TableShape& table, const ColumnShape& column,
                              const std::vector<Value>& row, const Value& v) {
  std::string problem;
  if (std::holds_alternative<std::monostate>(v)) return {};
  if (column.kind == ColumnKind::kBigint) {
    if (std::holds_alternative<int64_t>(v)) return {};
    problem = std::holds_alternative<double>(v) ? "a real number" : "text";
  } else {
    if (auto* s = std::get_if<std::string>(&v)) {
      if (s->find('\0') != std::string::npos) {
        problem = "text with a NUL byte (PostgreSQL's text cannot hold one)";
      } else if (!core::IsValidUtf8(*s)) {
        problem = "text that is not UTF-8";
      } else {
        return {};
      }
    } else {
      problem = std::holds_alternative<double>(v) ? "a real number" : "an integer";
    }
  }
  std::string key;
  for (const auto& k : table.primary_key) {
    for (size_t i = 0; i < table.columns.size(); ++i) {
      if (table.columns[i].name == k) {
        key += (key.empty() ? "" : ", ") + k + " = " + Shown(row[i]);
      }
    }
  }
  return core::Fail(ErrorCode::kInvalidArgument, "value_not_copyable",
                    "the source's " + table.name + "." + column.name + " holds " + problem +
                        " where " + std::string(KindName(column.kind)) + " belongs" +
                        (key.empty() ? "" : " (row " + key + ")") + "; nothing was copied");
}

/// Copies one table's rows from `in` to `out`, page by page in primary-key order. Returns the
/// number of rows written.
core::Result<int64_t> CopyTable(Transaction& in, std::string_view in_backend, Transaction& out,
                                const TableShape& table) {
  const std::string columns = QuotedList(ColumnNames(table));
  if (in_backend == "sqlite") {
    // SQLite reads a BLOB as text: refuse one rather than turn it into text.
    std::string any_blob;
    for (const auto& c : table.columns) {
      any_blob +=
          (any_blob.empty() ? "" : " OR ") + std::string("typeof(") + Quote(c.name) + ") = 'blob'";
    }
    GPUWERK_ASSIGN_OR_RETURN(auto blobs, in.QueryOne("SELECT COUNT(*) AS n FROM " +
                                                     Quote(table.name) + " WHERE " + any_blob));
    if (blobs->Int("n") > 0) {
      return core::Fail(ErrorCode::kInvalidArgument, "value_not_copyable",
                        "the source's " + table.name + " holds " + std::to_string(blobs->Int("n")) +
                            " rows with a blob, which no column of the store takes; nothing was "
                            "copied");
    }
  }
  std::string insert = "INSERT INTO " + Quote(table.name) + " (" + columns + ") VALUES (";
  for (size_t i = 0; i < table.columns.size(); ++i) insert += i == 0 ? "?" : ", ?";
  insert += ")";

  std::vector<size_t> key_index;
  for (const auto& k : table.primary_key) {
    for (size_t i = 0; i < table.columns.size(); ++i) {
      if (table.columns[i].name == k) key_index.push_back(i);
    }
  }
  const std::string select = "SELECT " + columns + " FROM " + Quote(table.name);
  std::string order, after;
  if (!key_index.empty()) {
    const std::string key = QuotedList(table.primary_key);
    order = " ORDER BY " + key + " LIMIT " + std::to_string(kPageRows);
    after = " WHERE (" + key + ") > (";
    for (size_t i = 0; i < key_index.size(); ++i) after += i == 0 ? "?" : ", ?";
    after += ")";
  }
  GPUWERK_ASSIGN_OR_RETURN(auto* reader, internal::Raw(in));
  GPUWERK_ASSIGN_OR_RETURN(auto* writer, internal::Raw(out));
  int64_t copied = 0;
  std::vector<Value> last;  // the last key copied; empty before the first page
  for (;;) {
    auto page = reader->QueryRaw(last.empty() ? select + order : select + after + order, last);
    if (!page) return std::unexpected(page.error());
    for (const auto& values : *page) {
      if (values.size() != table.columns.size()) {
        return core::Internal("reading " + table.name + ": a row of " +
                              std::to_string(values.size()) + " columns");
      }
      for (size_t i = 0; i < values.size(); ++i) {
        GPUWERK_TRY(CheckValue(table, table.columns[i], values, values[i]));
      }
      auto written = writer->ExecRaw(insert, values);
      if (!written) {
        core::Error e = written.error();
        e.message = "copying " + table.name + ": " + e.message;
        return std::unexpected(std::move(e));
      }
      ++copied;
    }
    // A table without a primary key comes in one read (the store's only one, rate_limit_events,
    // holds a sliding window of recent sign-in failures).
    if (key_index.empty() || static_cast<int64_t>(page->size()) < kPageRows) break;
    last.clear();
    for (size_t i : key_index) last.push_back(page->back()[i]);
  }
  return copied;
}

}  // namespace

core::Result<std::vector<TableShape>> ReadSchema(Database& db) {
  return db.Read([&](Transaction& tx) { return ReadSchemaIn(tx, db.Backend()); });
}

core::Result<CopyReport> CopyDatabase(Database& from, Database& to) {
  CopyReport report;
  report.schema_version = LatestSchemaVersion();
  // 1. The source: exactly this build's schema.
  GPUWERK_TRY(RefuseNewerSchema(from));
  GPUWERK_ASSIGN_OR_RETURN(const int source_version, SchemaVersion(from));
  if (source_version < LatestSchemaVersion()) {
    return core::Fail(ErrorCode::kFailedPrecondition, "schema_too_old",
                      source_version == 0
                          ? std::string("the source holds no gpuwerk schema (nothing to copy)")
                          : "the source's schema is version " + std::to_string(source_version) +
                                ", older than this gpuwerk's (" +
                                std::to_string(LatestSchemaVersion()) +
                                "): bring it up to date first with `gpuwerk admin migrate` (the "
                                "copy never writes to the source)");
  }
  GPUWERK_ASSIGN_OR_RETURN(auto source_tables, ReadSchema(from));
  GPUWERK_TRY(RefuseLeased(from, source_tables, "source"));

  // 2. The target: not newer, nothing of its own, no server.
  GPUWERK_TRY(RefuseNewerSchema(to));
  GPUWERK_ASSIGN_OR_RETURN(report.target_version_before, SchemaVersion(to));
  GPUWERK_ASSIGN_OR_RETURN(const Seed seed, MigrationSeed());
  GPUWERK_ASSIGN_OR_RETURN(auto target_tables, ReadSchema(to));
  for (const auto& t : target_tables) {
    if (!Find(seed.tables, t.name)) {
      return core::Fail(Mismatch("the target holds a table " + t.name +
                                 " that gpuwerk's schema does not have: copy into a database of "
                                 "gpuwerk's own (nothing was changed)"));
    }
  }
  // The source's tables and columns are what the migrations make (checked again against the
  // migrated target itself, in the copy's transaction).
  if (auto same = CompareSchemas(source_tables, seed.tables); !same) {
    core::Error e = same.error();
    e.message += " (compared with the schema this gpuwerk's migrations make; nothing was changed)";
    return core::Fail(std::move(e));
  }
  GPUWERK_TRY(RefuseLeased(to, target_tables, "target"));
  auto refuse_full = [](const std::vector<std::string>& full) -> core::Result<void> {
    if (full.empty()) return {};
    return core::Fail(ErrorCode::kFailedPrecondition, "target_not_empty",
                      "the target database is not empty: " + Join(full, ", ") +
                          "; copy into a new, empty database (nothing was changed)");
  };
  GPUWERK_ASSIGN_OR_RETURN(
      auto full, to.Read([&](Transaction& tx) { return RowsBeyondSeed(tx, target_tables, seed); }));
  GPUWERK_TRY(refuse_full(full));

  // 3. The target at the source's version, then everything in one transaction.
  GPUWERK_TRY(Migrate(to));
  GPUWERK_TRY(from.Read([&](Transaction& in) -> core::Result<void> {
    return to.Write([&](Transaction& out) -> core::Result<void> {
      report.tables.clear();
      report.rows = 0;
      GPUWERK_ASSIGN_OR_RETURN(auto source, ReadSchemaIn(in, from.Backend()));
      GPUWERK_ASSIGN_OR_RETURN(auto target, ReadSchemaIn(out, to.Backend()));
      GPUWERK_TRY(CompareSchemas(source, target));
      // A server that started on the target since the check above wrote to it.
      GPUWERK_ASSIGN_OR_RETURN(auto now_full, RowsBeyondSeed(out, target, seed));
      GPUWERK_TRY(refuse_full(now_full));
      for (auto t = target.rbegin(); t != target.rend(); ++t) {
        GPUWERK_TRY(out.Exec("DELETE FROM " + Quote(t->name)));
      }
      for (const auto& table : source) {
        GPUWERK_ASSIGN_OR_RETURN(const int64_t copied, CopyTable(in, from.Backend(), out, table));
        GPUWERK_ASSIGN_OR_RETURN(auto in_count,
                                 in.QueryOne("SELECT COUNT(*) AS n FROM " + Quote(table.name)));
        GPUWERK_ASSIGN_OR_RETURN(auto out_count,
                                 out.QueryOne("SELECT COUNT(*) AS n FROM " + Quote(table.name)));
        if (in_count->Int("n") != copied || out_count->Int("n") != copied) {
          return core::Fail(
              ErrorCode::kInternal, "copy_verify_failed",
              "the table " + table.name + " has " + std::to_string(in_count->Int("n")) +
                  " rows in the source, " + std::to_string(copied) + " were read and " +
                  std::to_string(out_count->Int("n")) + " are in the target; nothing was copied");
        }
        report.tables.push_back(CopiedTable{.name = table.name, .rows = copied});
        report.rows += copied;
      }
      if (to.Backend() == "postgresql") {
        // Identity and serial columns: their sequences past the largest value copied, so that
        // the next row they number does not collide (the store's own tables have none: ids are
        // random text).
        for (const auto& table : target) {
          for (const auto& c : table.columns) {
            if (!c.generated) continue;
            GPUWERK_TRY(out.Query("SELECT setval(pg_get_serial_sequence(?, ?), COALESCE(MAX(" +
                                      Quote(c.name) + "), 0) + 1, false) AS next FROM " +
                                      Quote(table.name),
                                  {Quote(table.name), c.name}));
          }
        }
      }
      return {};
    });
  }));
  return report;
}

}  // namespace gpuwerk::store
