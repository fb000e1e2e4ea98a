#include "app/admin_copy_database.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

#include "core/logging.h"
#include "store/open_database.h"

namespace gpuwerk::app {
namespace {

namespace fs = std::filesystem;

/// One side of the copy as the command line named it.
struct Side {
  std::string given;     ///< as given
  std::string database;  ///< what OpenDatabase takes: the URI, or the SQLite file
  fs::path data_dir;     ///< SQLite: the directory whose lock a server on it holds
  bool postgres = false;
};

Side Resolve(const std::string& given) {
  Side side{.given = given, .database = given, .data_dir = {}, .postgres = false};
  if (store::IsPostgresUrl(given)) {
    side.postgres = true;
    return side;
  }
  std::error_code ec;
  if (fs::is_directory(given, ec)) {
    side.data_dir = given;
    side.database = (fs::path(given) / "gpuwerk.db").string();
  } else {
    side.data_dir = fs::absolute(given, ec).parent_path();
  }
  return side;
}

/// The data directory's lock, held while this object lives (`gpuwerk server` takes the same one
/// at start: server_app.cc). A directory without the lock file has never had a server: nothing
/// is made in it.
class DataDirLock {
 public:
  ~DataDirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  core::Result<void> Take(const fs::path& dir, std::string_view side) {
    const std::string path = (dir / "lock").string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0) return {};
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      return core::Fail(core::ErrorCode::kFailedPrecondition, "data_dir_in_use",
                        "the " + std::string(side) + "'s data directory " + dir.string() +
                            " is in use by a gpuwerk server (or `gpuwerk up`); stop it first: "
                            "a copy of a live database would lose what it writes meanwhile");
    }
    return {};
  }

 private:
  int fd_ = -1;
};

std::string MigrateCommand(const Side& side) {
  if (side.postgres)
    return "gpuwerk admin migrate --database '" + store::DescribeDatabase(side.given, "") + "'";
  std::error_code ec;
  if (fs::is_directory(side.given, ec)) return "gpuwerk admin migrate --data " + side.given;
  return "gpuwerk admin migrate --database " + side.given;
}

}  // namespace

core::Result<store::CopyReport> CopyDatabaseCommand(const std::string& from, const std::string& to,
                                                    std::ostream& out) {
  const Side source = Resolve(from);
  const Side target = Resolve(to);
  std::error_code ec;
  if (!source.postgres && !fs::is_regular_file(source.database, ec)) {
    return core::Fail(core::ErrorCode::kNotFound, "not_found",
                      "the source " + source.database +
                          " is not a SQLite file (nor a data "
                          "directory holding gpuwerk.db)");
  }
  if (source.postgres == target.postgres &&
      (source.postgres ? source.database == target.database
                       : fs::equivalent(source.database, target.database, ec))) {
    return core::Fail(core::ErrorCode::kInvalidArgument, "invalid_argument",
                      "the source and the target are the same store");
  }
  DataDirLock source_lock, target_lock;
  if (!source.postgres) GPUWERK_TRY(source_lock.Take(source.data_dir, "source"));
  if (!target.postgres) GPUWERK_TRY(target_lock.Take(target.data_dir, "target"));

  GPUWERK_ASSIGN_OR_RETURN(auto from_db, store::OpenDatabase(source.database, source.database));
  GPUWERK_ASSIGN_OR_RETURN(auto to_db, store::OpenDatabase(target.database, target.database));
  auto report = store::CopyDatabase(*from_db, *to_db);
  if (!report) {
    core::Error e = report.error();
    if (e.api_code == "schema_too_old") {
      e.message += "; here: " + MigrateCommand(source);
    }
    return core::Fail(std::move(e));
  }
  const std::string from_shown = std::string(from_db->Backend()) + " " +
                                 store::DescribeDatabase(source.database, source.database);
  const std::string to_shown = std::string(to_db->Backend()) + " " +
                               store::DescribeDatabase(target.database, target.database);
  out << "copied " << from_shown << " -> " << to_shown << " (schema version "
      << report->schema_version << ", one transaction; row counts verified)\n";
  size_t width = 5;
  for (const auto& t : report->tables) width = std::max(width, t.name.size());
  out << "  " << std::left << std::setw(static_cast<int>(width)) << "table"
      << "  " << std::right << std::setw(10) << "rows"
      << "\n";
  for (const auto& t : report->tables) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << t.name << "  " << std::right
        << std::setw(10) << t.rows << "\n";
  }
  out << "  " << std::left << std::setw(static_cast<int>(width)) << "total"
      << "  " << std::right << std::setw(10) << report->rows << "\n";
  return report;
}

void AddAdminCopyDatabaseCommand(CLI::App& admin, int& exit_code) {
  CLI::App* cmd = admin.add_subcommand(
      "copy-database",
      "Copy every row of a stopped store into a new, empty one (SQLite to PostgreSQL)");
  auto from = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  auto log_level = std::make_shared<std::string>("warn");
  cmd->add_option("--from", *from,
                  "the store to copy: a SQLite file, a data directory (its gpuwerk.db) or a "
                  "postgresql:// URI; only read")
      ->envname("GPUWERK_COPY_FROM")
      ->required();
  cmd->add_option("--to", *to,
                  "the new store: a postgresql:// URI (or a SQLite file); migrated to this "
                  "gpuwerk's schema, and must hold nothing else")
      ->envname("GPUWERK_COPY_TO")
      ->required();
  cmd->add_option("--log-level", *log_level, "trace, debug, info, warn, error (default warn)");
  cmd->callback([from, to, log_level, &exit_code] {
    core::InitLogging(*log_level);
    auto copied = CopyDatabaseCommand(*from, *to, std::cout);
    if (!copied) {
      std::fprintf(stderr, "gpuwerk admin copy-database: %s\n", copied.error().message.c_str());
      exit_code = 1;
      return;
    }
    exit_code = 0;
  });
}

}  // namespace gpuwerk::app
