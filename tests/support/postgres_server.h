#pragma once

// A real PostgreSQL server for tests (Debian's `postgresql`, scripts/setup.sh test group): a
// cluster made by `initdb` in a temporary directory and `postgres` run as a child process on a
// free port of 127.0.0.1, with a fresh database for each test (CreateDatabase). Under ctest one
// server serves the whole run (the `postgres_server` fixture,
// tests/support/postgres_test_server.cc, whose URL ExternalPostgresUrl reads); a test binary run by
// hand starts one of its own. PostgreSQL refuses to run as root: when the tests run as root, initdb
// and postgres run as the `postgres` user the Debian package creates (else `nobody`), with the
// temporary directory given to that user. initdb takes seconds, so its result is kept once per
// build tree (GPUWERK_TEST_BINARY_DIR/test-postgres/) and copied for each cluster (a tenth of a
// second). Set GPUWERK_TEST_POSTGRES_URL (a superuser's URL, e.g.
// postgresql://postgres@127.0.0.1:5432/postgres) to use a server that is already running instead.
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/listening_child.h"
#include "tests/support/net.h"
#include "tests/support/temp_dir.h"

namespace gpuwerk::testing {

/// The directory of PostgreSQL's server programs (initdb, postgres): the newest
/// /usr/lib/postgresql/<version>/bin holding both, as Debian installs them; "" when none.
inline std::string PostgresBinDir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string best;
  int best_version = -1;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const fs::path bin = entry.path() / "bin";
    if (::access((bin / "initdb").c_str(), X_OK) != 0 ||
        ::access((bin / "postgres").c_str(), X_OK) != 0) {
      continue;
    }
    const int version = std::atoi(entry.path().filename().c_str());
    if (version > best_version) {
      best_version = version;
      best = bin.string();
    }
  }
  return best;
}

/// The URL of a running server the tests should use instead of their own, or "": the
/// GPUWERK_TEST_POSTGRES_URL variable, else the first line of the file
/// GPUWERK_TEST_POSTGRES_URL_FILE names, where the ctest fixture `postgres_server_start`
/// (tests/support/postgres_test_server.cc) writes the URL of the one server all of a ctest run's
/// PostgreSQL tests share. Without that file (the fixture did not run, e.g. a test binary run by
/// hand) the test process starts its own.
inline std::string ExternalPostgresUrl() {
  if (const char* url = std::getenv("GPUWERK_TEST_POSTGRES_URL"); url != nullptr && *url != 0) {
    return url;
  }
  const char* file = std::getenv("GPUWERK_TEST_POSTGRES_URL_FILE");
  if (file == nullptr || *file == 0) return "";
  std::string url;
  if (FILE* f = std::fopen(file, "r")) {
    char buf[1024];
    if (std::fgets(buf, sizeof buf, f) != nullptr) url = buf;
    std::fclose(f);
  }
  while (!url.empty() && (url.back() == '\n' || url.back() == '\r')) url.pop_back();
  return url;
}

/// Why a PostgreSQL server cannot be had here, or nullopt when it can.
inline std::optional<std::string> PostgresUnavailable() {
  if (!ExternalPostgresUrl().empty()) return std::nullopt;
  if (PostgresBinDir().empty()) {
    return "PostgreSQL's initdb and postgres are not in /usr/lib/postgresql/<version>/bin "
           "(scripts/setup.sh test installs Debian's postgresql)";
  }
  return std::nullopt;
}

/// A PostgreSQL cluster of this test process. Stopped (fast shutdown) and its directory removed
/// by the destructor; PR_SET_PDEATHSIG makes the server shut down at once should the test process
/// die first.
class PostgresServer {
 public:
  PostgresServer() = default;
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;
  ~PostgresServer() { Stop(); }

  /// The server every test of this process shares, started at the first call; null with the
  /// reason in `error` when it cannot start.
  static PostgresServer* Shared(std::string* error) {
    static std::mutex mu;
    static std::unique_ptr<PostgresServer> shared;
    static std::string failure;
    std::lock_guard lock(mu);
    if (!shared && failure.empty()) {
      auto server = std::make_unique<PostgresServer>();
      if (server->Start(&failure)) shared = std::move(server);
    }
    if (!shared) *error = failure;
    return shared.get();
  }

  /// Starts the cluster (or adopts GPUWERK_TEST_POSTGRES_URL's server); false with the reason in
  /// `error` when it did not accept connections within 30 s.
  bool Start(std::string* error) {
    if (const std::string external = ExternalPostgresUrl(); !external.empty()) {
      admin_url_ = external;
      return Ping(error);
    }
    const std::string bin = PostgresBinDir();
    if (bin.empty()) {
      *error = *PostgresUnavailable();
      return false;
    }
    dir_ = std::make_unique<TempDir>();
    const std::filesystem::path data = dir_->path() / "data";
    if (!RunAsServerUser(error)) return false;
    if (!CopyTemplate(bin, data, error)) return false;
    port_ = FreePort();
    // Durability is not tested here: no fsync, so that a test's databases come fast.
    std::vector<std::string> args = {bin + "/postgres",
                                     "-D",
                                     data.string(),
                                     "-p",
                                     std::to_string(port_),
                                     "-c",
                                     "listen_addresses=127.0.0.1",
                                     "-c",
                                     "unix_socket_directories=" + dir_->path().string(),
                                     "-c",
                                     "fsync=off",
                                     "-c",
                                     "synchronous_commit=off",
                                     "-c",
                                     "full_page_writes=off",
                                     "-c",
                                     "max_connections=300",
                                     "-c",
                                     "logging_collector=off"};
    pid_ = Spawn(args, (dir_->path() / "postgres.log").string(), SIGQUIT);
    if (pid_ < 0) {
      *error = "cannot start " + bin + "/postgres";
      return false;
    }
    admin_url_ = "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::string last;
    while (!Ping(&last)) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *error = "postgres exited before accepting connections; its log: " + Log();
        return false;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        *error =
            "postgres did not accept connections within 30 s (" + last + "); its log: " + Log();
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  /// Shuts the server down (SIGINT: fast shutdown) and removes its directory; idempotent.
  void Stop() {
    StopChild(pid_, SIGINT, std::chrono::seconds(10));
    pid_ = -1;
    dir_.reset();
  }

  /// Creates an empty database with a new name; returns its URL, or nullopt with the reason in
  /// `error`.
  std::optional<std::string> CreateDatabase(std::string* error) {
    static std::atomic<int> counter{0};
    const std::string name =
        "gpuwerk_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1));
    // FILE_COPY (PostgreSQL 15+) copies the template's files instead of writing them all to the
    // WAL: several times faster for an empty database.
    const std::string create = "CREATE DATABASE " + name + " TEMPLATE template0 ENCODING 'UTF8'";
    if (!Admin(create + " STRATEGY FILE_COPY", error) && !Admin(create, error)) {
      return std::nullopt;
    }
    return UrlOf(name);
  }

  /// Drops a database CreateDatabase made, ending its connections first.
  bool DropDatabase(const std::string& url, std::string* error) {
    const std::string name = url.substr(url.rfind('/') + 1);
    return Admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", error);
  }

  /// The URL of database `name` on this server.
  std::string UrlOf(const std::string& name) const {
    const size_t slash = admin_url_.rfind('/');
    const size_t query = admin_url_.find('?', slash);
    return admin_url_.substr(0, slash + 1) + name +
           (query == std::string::npos ? "" : admin_url_.substr(query));
  }
  /// Whether the server this object started is still running (false for an external one).
  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  /// The directory of the cluster this object started (its data, socket and log), or "".
  std::filesystem::path dir() const { return dir_ ? dir_->path() : std::filesystem::path(); }
  /// The URL of the maintenance database (`postgres`).
  const std::string& admin_url() const { return admin_url_; }
  /// The server's log so far ("" for an external server).
  std::string Log() const {
    if (!dir_) return "";
    return ReadTextFile(dir_->path() / "postgres.log");
  }

 private:
  /// Picks the user initdb and postgres run as: this one, or when root, `postgres` (else
  /// `nobody`), giving it the temporary directory.
  bool RunAsServerUser(std::string* error) {
    if (::geteuid() != 0) return true;
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) pw = ::getpwnam("nobody");
    if (pw == nullptr) {
      *error =
          "running as root and there is neither a postgres nor a nobody user to run "
          "PostgreSQL as (it refuses root)";
      return false;
    }
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    if (::chown(dir_->path().c_str(), uid_, gid_) != 0) {
      *error = "cannot give " + dir_->path().string() + " to the PostgreSQL user";
      return false;
    }
    return true;
  }

  /// Makes the cluster in `data`: a copy of the build tree's initdb result, made first when
  /// there is none (by initdb into this directory, then copied under a temporary name and
  /// renamed, so that test processes starting at once never see half of one).
  bool CopyTemplate(const std::string& bin, const std::filesystem::path& data, std::string* error) {
    namespace fs = std::filesystem;
#ifdef GPUWERK_TEST_BINARY_DIR
    const fs::path cache_dir = fs::path(GPUWERK_TEST_BINARY_DIR) / "test-postgres";
#else
    const fs::path cache_dir = fs::temp_directory_path() / "gpuwerk-test-postgres";
#endif
    const fs::path templ =
        cache_dir / ("template-" + fs::path(bin).parent_path().filename().string());
    std::error_code ec;
    if (!fs::exists(templ / "PG_VERSION", ec)) {
      const pid_t pid =
          Spawn({bin + "/initdb", "-D", data.string(), "-U", "postgres", "--auth=trust", "-E",
                 "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions"},
                (dir_->path() / "initdb.log").string(), SIGKILL);
      int status = 0;
      if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
          WEXITSTATUS(status) != 0) {
        *error = "initdb failed; its output: " + ReadTextFile(dir_->path() / "initdb.log");
        return false;
      }
      fs::create_directories(cache_dir, ec);
      const fs::path partial = cache_dir / ("partial-" + std::to_string(::getpid()));
      const std::string copy = "cp -a '" + data.string() + "' '" + partial.string() + "'";
      if (std::system(copy.c_str()) == 0) {
        fs::rename(partial, templ, ec);  // another process may have won: its copy is as good
        if (ec) fs::remove_all(partial, ec);
      }
      return true;
    }
    const std::string copy = "cp -a '" + templ.string() + "' '" + data.string() + "'";
    if (std::system(copy.c_str()) != 0) {
      *error = "cannot copy the PostgreSQL cluster template " + templ.string();
      return false;
    }
    return true;
  }

  /// Starts `args` as the server user with stdout and stderr to `log`; `death` is sent to it
  /// should this process die first. Returns its pid, or -1.
  pid_t Spawn(std::vector<std::string> args, const std::string& log, int death) const {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (uid_ != 0) {
        if (::fchown(fd, uid_, gid_) != 0) ::_exit(126);
      }
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::setsid();
    if (uid_ != 0) {
      // The parent-death signal is cleared when the credentials change: set it after.
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0) ::_exit(126);
    }
    ::prctl(PR_SET_PDEATHSIG, death);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }

  /// Runs one statement on the maintenance database (outside a transaction, as CREATE DATABASE
  /// needs).
  bool Admin(const std::string& sql, std::string* error) const {
    PGconn* conn = PQconnectdb(admin_url_.c_str());
    bool ok = PQstatus(conn) == CONNECTION_OK;
    if (ok) {
      PGresult* r = PQexec(conn, sql.c_str());
      ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      PQclear(r);
    }
    if (!ok) *error = sql + ": " + PQerrorMessage(conn);
    PQfinish(conn);
    return ok;
  }

  bool Ping(std::string* error) const {
    PGconn* conn = PQconnectdb(admin_url_.c_str());
    const bool ok = PQstatus(conn) == CONNECTION_OK;
    if (!ok) *error = PQerrorMessage(conn);
    PQfinish(conn);
    return ok;
  }

  std::unique_ptr<TempDir> dir_;
  std::string admin_url_;
  int port_ = 0;
  pid_t pid_ = -1;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

}  // namespace gpuwerk::testing
