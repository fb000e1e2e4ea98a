#pragma once

#include <CLI/CLI.hpp>
#include <ostream>

#include "app/server_config.h"
#include "core/error.h"

namespace gpuwerk::app {

/// What MigrateStore did: the schema version before and after.
struct MigrateOutcome {
  int before = 0;  ///< 0: an empty database
  int after = 0;   ///< store::LatestSchemaVersion()
};

/// `gpuwerk admin migrate`: opens the store `config` names (`database`, else DATA/gpuwerk.db)
/// and applies the migrations this build has that it lacks (store::Migrate), saying what it did
/// on `out`. Errors: the store's open errors (kUnavailable store_unavailable); kFailedPrecondition
/// "schema_too_new" when a newer gpuwerk migrated the database (nothing changed); kInternal when a
/// migration fails (left at the last good version).
core::Result<MigrateOutcome> MigrateStore(const ServerConfig& config, std::ostream& out);

/// Adds `migrate` to the `admin` subcommand: the server's `--data`, `--database` and
/// `--log-level` (its config file and GPUWERK_ variables too). Exit status 0 when the schema is
/// current, 1 with the reason on stderr otherwise.
void AddAdminMigrateCommand(CLI::App& admin, int& exit_code);

}  // namespace gpuwerk::app
