// postgres_test_server start|stop STATE_DIR: the one PostgreSQL server a ctest run's
// PostgreSQL tests share (the ctest fixture `postgres_server`: the test `postgres_server_start`
// is its FIXTURES_SETUP, `postgres_server_stop` its FIXTURES_CLEANUP, every test labelled
// `postgresql` requires it; cmake/GpuwerkHelpers.cmake).
//
// `start` stops whatever a killed earlier run left (STATE_DIR/guardian.pid, STATE_DIR/cluster),
// then forks a guardian that starts the server (tests/support/postgres_server.h: the build
// tree's initdb template, a free port of 127.0.0.1) and writes its superuser URL to
// STATE_DIR/url, which the tests read (GPUWERK_TEST_POSTGRES_URL_FILE); `start` returns once the
// server accepts connections (exit 0) or says why it did not (exit 1). Each test process still
// makes databases of its own on it (CreateDatabase), so tests stay isolated and run in parallel.
//
// The guardian stops the server (fast shutdown) and removes its directory and STATE_DIR/url when
// `stop` asks (SIGTERM), when ctest (the parent of `start`) is gone (killed, or ended without
// running the cleanup), or when the server died. The server itself gets SIGQUIT should the
// guardian die first (PR_SET_PDEATHSIG), and the next `start` removes what is left.
//
// With GPUWERK_TEST_POSTGRES_URL set (a server already running) or without PostgreSQL's
// programs, `start` starts nothing and says so: the tests then use that server, or skip with
// the reason.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "tests/support/postgres_server.h"

namespace fs = std::filesystem;
using gpuwerk::testing::PostgresServer;

namespace {

volatile std::sig_atomic_t g_stop = 0;

void OnStopSignal(int) { g_stop = 1; }

std::string ReadLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool WriteAtomically(const fs::path& path, const std::string& text) {
  const fs::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << text << '\n';
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  return !ec;
}

/// Whether `pid` is alive and runs this program (a pid file outliving its process may name
/// another's by now).
bool IsGuardian(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return !ec && exe.filename() == "postgres_test_server";
}

/// Stops the guardian STATE_DIR/guardian.pid names (it stops its server), waiting for it up to
/// 30 s, then kills it; removes what it left behind. Returns whether there was one.
bool StopGuardian(const fs::path& state) {
  const pid_t pid = static_cast<pid_t>(std::atoi(ReadLine(state / "guardian.pid").c_str()));
  const bool found = IsGuardian(pid);
  if (found) {
    ::kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (IsGuardian(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (IsGuardian(pid)) ::kill(pid, SIGKILL);  // its server then gets SIGQUIT (pdeathsig)
  }
  std::error_code ec;
  if (const std::string cluster = ReadLine(state / "cluster"); !cluster.empty()) {
    fs::remove_all(cluster, ec);  // the guardian's temporary directory, when it was killed
  }
  fs::remove(state / "cluster", ec);
  fs::remove(state / "url", ec);
  fs::remove(state / "guardian.pid", ec);
  return found;
}

/// The guardian: starts the server, reports on `ready` ("ok" or the reason), then waits for a
/// reason to stop it. Never returns.
[[noreturn]] void Guard(const fs::path& state, pid_t ctest, int ready) {
  ::setsid();  // out of ctest's process group: its Ctrl-C reaches ctest, and we see it go
  if (const int null = ::open("/dev/null", O_RDWR); null >= 0) {
    // ctest reads the test's output until every holder of the pipe closes it.
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO) ::close(null);
  }
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGHUP, &action, nullptr);

  std::string message;
  int status = 0;
  {
    PostgresServer server;
    std::string error;
    if (!server.Start(&error)) {
      message = "PostgreSQL did not start: " + error;
      status = 1;
    } else if (!WriteAtomically(state / "cluster", server.dir().string()) ||
               !WriteAtomically(state / "url", server.admin_url())) {
      message = "cannot write the server's URL to " + (state / "url").string();
      status = 1;
    } else {
      message = "ok " + server.admin_url();
    }
    message += '\n';
    if (::write(ready, message.data(), message.size()) < 0) status = 1;
    ::close(ready);
    while (status == 0 && g_stop == 0 && server.Running() &&
           (::kill(ctest, 0) == 0 || errno == EPERM)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::error_code ec;
    fs::remove(state / "url", ec);
  }  // the server stops (SIGINT, fast shutdown) and its directory goes
  std::error_code ec;
  fs::remove(state / "cluster", ec);
  if (ReadLine(state / "guardian.pid") == std::to_string(::getpid())) {
    fs::remove(state / "guardian.pid", ec);
  }
  std::_Exit(status);
}

int Start(const fs::path& state) {
  std::error_code ec;
  fs::create_directories(state, ec);
  if (StopGuardian(state)) {
    std::cout << "stopped the server an earlier, killed run left running\n";
  }
  if (const char* url = std::getenv("GPUWERK_TEST_POSTGRES_URL"); url != nullptr && *url != 0) {
    std::cout << "GPUWERK_TEST_POSTGRES_URL is set: the tests use that server\n";
    return 0;
  }
  if (auto why = gpuwerk::testing::PostgresUnavailable()) {
    std::cout << "no PostgreSQL here, its tests will skip: " << *why << "\n";
    return 0;
  }
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    std::perror("pipe2");
    return 1;
  }
  const pid_t ctest = ::getppid();
  std::cout.flush();
  const pid_t guardian = ::fork();
  if (guardian < 0) {
    std::perror("fork");
    return 1;
  }
  if (guardian == 0) {
    ::close(ready[0]);
    Guard(state, ctest, ready[1]);
  }
  ::close(ready[1]);
  WriteAtomically(state / "guardian.pid", std::to_string(guardian));
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(ready[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) reply.append(buf, static_cast<size_t>(n));
  }
  ::close(ready[0]);
  if (reply.rfind("ok ", 0) == 0) {
    std::cout << "PostgreSQL for this run's tests: " << reply.substr(3);
    return 0;
  }
  std::cout << (reply.empty() ? "the PostgreSQL guardian ended without a word\n" : reply);
  int status = 0;
  ::waitpid(guardian, &status, 0);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "start" && mode != "stop") {
    std::cerr << "usage: postgres_test_server start|stop STATE_DIR\n";
    return 2;
  }
  const fs::path state = argv[2];
  if (mode == "start") return Start(state);
  std::cout << (StopGuardian(state) ? "stopped this run's PostgreSQL\n" : "no server to stop\n");
  return 0;
}
