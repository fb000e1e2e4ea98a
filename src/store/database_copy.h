#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store {

/// What a column holds, as the copier converts it: the store's columns are BIGINT (Unix seconds,
/// minor units, 0/1 flags, counters) or TEXT (ids, names, JSON, keys). Any other declared type is
/// kOther, which CopyDatabase refuses rather than guess at.
enum class ColumnKind { kBigint, kText, kOther };

/// One column as the database's catalog declares it.
struct ColumnShape {
  std::string name;
  ColumnKind kind = ColumnKind::kOther;
  std::string declared;    ///< the type as the catalog names it ("BIGINT", "text", …)
  bool generated = false;  ///< PostgreSQL: an identity column or one a sequence fills (serial)
};

/// One table as the database's catalog declares it (sqlite_master and PRAGMA table_info on
/// SQLite, information_schema and pg_catalog on PostgreSQL, in the connection's current schema).
struct TableShape {
  std::string name;
  std::vector<ColumnShape> columns;      ///< in declaration order
  std::vector<std::string> primary_key;  ///< its columns in key order; empty: none
  std::vector<std::string> references;   ///< the other tables its foreign keys name, sorted
};

/// The tables of `db`'s schema, parents before the tables whose foreign keys name them (a
/// topological order, ties by name), read in one read transaction. SQLite's own tables
/// (`sqlite_…`) are left out. Errors: kFailedPrecondition "schema_mismatch" when foreign keys make
/// a cycle between tables (no order exists); the store's.
core::Result<std::vector<TableShape>> ReadSchema(Database& db);

/// One table CopyDatabase copied.
struct CopiedTable {
  std::string name;
  int64_t rows = 0;  ///< rows in the target after the copy (equal to the source's)
};

/// What CopyDatabase did.
struct CopyReport {
  int schema_version = 0;           ///< both sides' schema version (LatestSchemaVersion())
  int target_version_before = 0;    ///< the target's before it was migrated (0: empty)
  std::vector<CopiedTable> tables;  ///< every table, in the order copied (foreign-key order)
  int64_t rows = 0;                 ///< all tables' rows together
};

/// Copies every row of every table of `from` into `to` (docs/database.md "Moving from `gpuwerk
/// up` (SQLite) to PostgreSQL"), on any pair of backends. Schema-generic: the tables, columns,
/// keys and foreign keys come from the catalogs (ReadSchema), never from a list kept here.
///
/// In order, changing nothing until every check has passed:
/// 1. `from` must be at exactly this build's schema version (LatestSchemaVersion()): a newer one
///    is kFailedPrecondition "schema_too_new" (run the newer gpuwerk), an older one (or none)
///    "schema_too_old" (its message says to run `gpuwerk admin migrate` on it first; the copy
///    never writes to `from`).
/// 2. Neither side may have a live leader lease (LeaderLease::Unexpired: a server runs on it):
///    kFailedPrecondition "database_in_use". (A SQLite file's server is found by its data
///    directory's lock, which the caller checks: `gpuwerk admin copy-database`.)
/// 3. `to` must be no newer than this build ("schema_too_new"), hold no table that the
///    migrations do not make ("schema_mismatch", naming it), and hold no row but the ones the
///    migrations themselves write (the seeded GPU types, `schema_migrations`): else
///    kFailedPrecondition "target_not_empty", naming the tables and their row counts.
/// Then `to` is migrated to this build's version (store::Migrate), and in ONE write transaction
/// on `to` (all or nothing): the two schemas are compared table by table and column by column
/// (same tables, same columns in the same order, same kinds; a difference is "schema_mismatch"
/// naming the table or column); the migrations' rows are removed; every table is copied in
/// foreign-key order (`schema_migrations` too, so `to` records the source's history), page by
/// page in primary-key order from one read snapshot of `from`, each value as it is (64-bit
/// integers exactly, text byte for byte, NULL as NULL); PostgreSQL identity and serial columns'
/// sequences are moved past the largest value copied; each table's row count in `to` is
/// compared with `from`'s. A value a column cannot take faithfully (text in a BIGINT column, a
/// real number, a blob, text with a NUL byte or that is not UTF-8) is kInvalidArgument
/// "value_not_copyable" naming the table, column and row key; a count that differs kInternal
/// "copy_verify_failed"; both leave `to` as it was after its migration.
///
/// Errors besides those: the store's (a backend's errors say which table was being copied).
/// Blocking; runs for as long as the data takes (a page of 500 rows at a time, one statement
/// per row written). `from` and `to` must be different databases.
core::Result<CopyReport> CopyDatabase(Database& from, Database& to);

}  // namespace gpuwerk::store
