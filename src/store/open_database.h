#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "store/database.h"

namespace gpuwerk::store {

/// Whether `database` (the `--database` setting) names a PostgreSQL server: it starts with
/// `postgresql://` or `postgres://` (libpq's connection URIs).
bool IsPostgresUrl(std::string_view database);

/// Opens the store `database` names (docs/database.md): a PostgreSQL connection URI
/// (PostgresDatabase), or the path of a SQLite file (SqliteDatabase, created when absent);
/// empty means `default_sqlite_path`. Does not migrate. Errors: the backend's Open errors
/// (kUnavailable "store_unavailable"), whose messages never carry a password.
core::Result<std::unique_ptr<Database>> OpenDatabase(std::string_view database,
                                                     const std::string& default_sqlite_path);

/// `database` as it may be shown in a log line: a PostgreSQL URI with its password replaced by
/// "***", a SQLite path as it is ("" → `default_sqlite_path`).
std::string DescribeDatabase(std::string_view database, const std::string& default_sqlite_path);

}  // namespace gpuwerk::store
