#include "app/admin_migrate.h"

#include <cstdio>
#include <iostream>
#include <string_view>
#include <vector>

#include "app/command_config.h"
#include "core/logging.h"
#include "store/database.h"
#include "store/open_database.h"

namespace gpuwerk::app {

core::Result<MigrateOutcome> MigrateStore(const ServerConfig& config, std::ostream& out) {
  const std::string sqlite_path = (config.data_dir / "gpuwerk.db").string();
  if (config.database.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config.data_dir, ec);
  }
  GPUWERK_ASSIGN_OR_RETURN(auto db, store::OpenDatabase(config.database, sqlite_path));
  MigrateOutcome outcome;
  GPUWERK_ASSIGN_OR_RETURN(outcome.before, store::SchemaVersion(*db));
  GPUWERK_TRY(store::Migrate(*db));
  GPUWERK_ASSIGN_OR_RETURN(outcome.after, store::SchemaVersion(*db));
  const std::string where =
      std::string(db->Backend()) + " " + store::DescribeDatabase(config.database, sqlite_path);
  if (outcome.before == outcome.after) {
    out << "store " << where << ": schema version " << outcome.after
        << ", the newest this gpuwerk knows; nothing to do\n";
  } else {
    out << "store " << where << ": schema version " << outcome.before << " -> " << outcome.after
        << " (" << (outcome.after - outcome.before) << " migrations applied)\n";
  }
  return outcome;
}

void AddAdminMigrateCommand(CLI::App& admin, int& exit_code) {
  // Its flags are the three it uses; its config file may be the server's own
  // (/etc/gpuwerk/server.conf), whose other keys it skips.
  std::vector<Option<ServerConfig>> options;
  std::vector<std::string> server_only;
  for (const auto& option : ServerOptions()) {
    if (option.key == "data_dir" || option.key == "database" || option.key == "log_level") {
      options.push_back(option);
    } else {
      server_only.emplace_back(option.key);
    }
  }
  AddConfiguredCommand<ServerConfig>(
      admin, "migrate",
      "Bring the store's schema up to this gpuwerk's (the server does it at start too)", options,
      "GPUWERK_CONFIG",
      [](const ServerConfig& config) {
        core::InitLogging(config.log_level);
        auto migrated = MigrateStore(config, std::cout);
        if (!migrated) {
          std::fprintf(stderr, "gpuwerk admin migrate: %s\n", migrated.error().message.c_str());
          return 1;
        }
        return 0;
      },
      exit_code, std::move(server_only));
}

}  // namespace gpuwerk::app
