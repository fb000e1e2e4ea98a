#include "store/open_database.h"

#include "store/postgres_database.h"
#include "store/sqlite_database.h"

namespace gpuwerk::store {

bool IsPostgresUrl(std::string_view database) {
  return database.starts_with("postgresql://") || database.starts_with("postgres://");
}

core::Result<std::unique_ptr<Database>> OpenDatabase(std::string_view database,
                                                     const std::string& default_sqlite_path) {
  if (IsPostgresUrl(database)) {
    GPUWERK_ASSIGN_OR_RETURN(auto pg, PostgresDatabase::Open({.url = std::string(database)}));
    return std::unique_ptr<Database>(std::move(pg));
  }
  const std::string path = database.empty() ? default_sqlite_path : std::string(database);
  GPUWERK_ASSIGN_OR_RETURN(auto sqlite, SqliteDatabase::Open({.path = path}));
  return std::unique_ptr<Database>(std::move(sqlite));
}

std::string DescribeDatabase(std::string_view database, const std::string& default_sqlite_path) {
  if (IsPostgresUrl(database)) return RedactDatabaseUrl(database);
  return database.empty() ? default_sqlite_path : std::string(database);
}

}  // namespace gpuwerk::store
