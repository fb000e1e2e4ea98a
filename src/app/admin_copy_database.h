#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "core/error.h"
#include "store/database_copy.h"

namespace gpuwerk::app {

/// `gpuwerk admin copy-database --from SOURCE --to TARGET` (docs/database.md "Moving from
/// `gpuwerk up` (SQLite) to PostgreSQL"): opens both stores and runs store::CopyDatabase, then
/// writes a per-table summary on `out`. SOURCE and TARGET are each a PostgreSQL connection URI
/// (`postgresql://…`), a SQLite file, or a data directory (its `gpuwerk.db`). A SQLite side's data
/// directory (the one given, or the file's own directory) is locked as `gpuwerk server` and `up`
/// lock it (`DIR/lock`, flock) for the whole copy: while a server holds it the copy is refused,
/// and no server starts on it meanwhile. The source is only read. Errors: kFailedPrecondition
/// "data_dir_in_use" (a server runs on a SQLite side), kNotFound "not_found" (a SQLite source
/// file that does not exist), kInvalidArgument "invalid_argument" (the same store on both
/// sides); the store's open errors (kUnavailable store_unavailable); every error of
/// store::CopyDatabase ("schema_too_old" then names the `gpuwerk admin migrate` command to run on
/// the source).
core::Result<store::CopyReport> CopyDatabaseCommand(const std::string& from, const std::string& to,
                                                    std::ostream& out);

/// Adds `copy-database` to the `admin` subcommand: `--from` (or GPUWERK_COPY_FROM) and `--to`
/// (or GPUWERK_COPY_TO), both required; a PostgreSQL password is best kept out of both (libpq's
/// `~/.pgpass` or PGPASSWORD). Exit status 0 when copied, 1 with the reason on stderr otherwise.
void AddAdminCopyDatabaseCommand(CLI::App& admin, int& exit_code);

}  // namespace gpuwerk::app
