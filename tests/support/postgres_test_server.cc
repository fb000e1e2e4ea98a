// postgres_test_server start|stop STATE_DIR: the one PostgreSQL server a ctest run's
// PostgreSQL tests share (the ctest fixture `postgres_server`: the test `postgres_server_start`
// is its FIXTURES_SETUP, `postgres_server_stop` its FIXTURES_CLEANUP, every test labelled
// `postgresql` requires it; cmake/GpuwerkHelpers.cmake).
//
// `start` removes whatever a killed earlier run left (STATE_DIR/cluster), then forks a guardian
// that starts the server (tests/support/postgres_server.h: the build tree's initdb template, a
// free port of 127.0.0.1) and writes its superuser URL to STATE_DIR/url, which the tests read
// (GPUWERK_TEST_POSTGRES_URL_FILE); `start` returns once the server accepts connections (exit 0) or
// says why it did not (exit 1). Each test process still makes databases of its own on it
// (CreateDatabase), so tests stay isolated and run in parallel.
//
// The guardian serves the ctest runs listed in STATE_DIR/runs (their pids: the parents of
// `start` and `stop`); a second ctest run in the same build tree while one is going joins the
// list and shares the server. `stop` takes its run off the list; the guardian stops the server
// (fast shutdown) and removes its directory and STATE_DIR/url once no listed run is left, be it
// by `stop` or because ctest is gone (killed, or ended without the cleanup), or when the server
// died. The server itself gets SIGQUIT should the guardian die first (PR_SET_PDEATHSIG), and the
// next `start` removes what is left. STATE_DIR/lock (flock) orders all of this.
//
// With GPUWERK_TEST_POSTGRES_URL set (a server already running) or without PostgreSQL's
// programs, `start` starts nothing and says so: the tests then use that server, or skip with
// the reason.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

bool Alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

/// Whether `pid` is alive and runs this program (a pid file outliving its process may name
/// another's by now).
bool IsGuardian(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return !ec && exe.filename() == "postgres_test_server";
}

pid_t GuardianPid(const fs::path& state) {
  return static_cast<pid_t>(std::atoi(ReadLine(state / "guardian.pid").c_str()));
}

/// STATE_DIR/lock, held (flock) until the object dies.
class StateLock {
 public:
  explicit StateLock(const fs::path& state)
      : fd_(::open((state / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) {
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~StateLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  /// The lock's descriptor: a child forked while it is held closes it (a flock belongs to the
  /// open file, which the child shares, so it would hold the lock for as long as it lives).
  int fd() const { return fd_; }
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_;
};

/// The ctest runs the server serves (STATE_DIR/runs), those still alive.
std::vector<pid_t> Runs(const fs::path& state) {
  std::vector<pid_t> runs;
  std::ifstream in(state / "runs");
  pid_t pid;
  while (in >> pid) {
    if (Alive(pid)) runs.push_back(pid);
  }
  return runs;
}

void WriteRuns(const fs::path& state, const std::vector<pid_t>& runs) {
  std::ostringstream out;
  for (pid_t pid : runs) out << pid << ' ';
  WriteAtomically(state / "runs", out.str());
}

/// Removes the state files and what a killed guardian left (its cluster's directory). With the
/// lock held, and no guardian alive (or the caller is the guardian, which removes its own
/// directory).
void RemoveState(const fs::path& state, bool cluster_too) {
  std::error_code ec;
  if (const std::string cluster = ReadLine(state / "cluster"); cluster_too && !cluster.empty()) {
    fs::remove_all(cluster, ec);
  }
  for (const char* name : {"cluster", "url", "guardian.pid", "runs"}) fs::remove(state / name, ec);
}

/// The guardian: starts the server, reports on `ready` ("ok" or the reason), then serves until
/// no listed run is left. Never returns.
[[noreturn]] void Guard(const fs::path& state, int ready) {
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
    // Once the state is gone (with the lock held) no `start` joins any more: the next one
    // finds no guardian and starts a server of its own.
    for (bool done = false; !done;) {
      if (status == 0 && g_stop == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      StateLock lock(state);
      done = status != 0 || g_stop != 0 || !server.Running() || Runs(state).empty();
      if (done && GuardianPid(state) == ::getpid()) RemoveState(state, /*cluster_too=*/false);
    }
  }  // the server stops (SIGINT, fast shutdown) and its directory goes
  std::_Exit(status);
}

int Start(const fs::path& state) {
  std::error_code ec;
  fs::create_directories(state, ec);
  if (const char* url = std::getenv("GPUWERK_TEST_POSTGRES_URL"); url != nullptr && *url != 0) {
    std::cout << "GPUWERK_TEST_POSTGRES_URL is set: the tests use that server\n";
    return 0;
  }
  if (auto why = gpuwerk::testing::PostgresUnavailable()) {
    std::cout << "no PostgreSQL here, its tests will skip: " << *why << "\n";
    return 0;
  }
  const pid_t ctest = ::getppid();
  int ready[2];
  pid_t guardian = -1;
  {
    StateLock lock(state);
    if (const pid_t running = GuardianPid(state); IsGuardian(running)) {
      // Another ctest run in this build tree is going: share its server.
      auto runs = Runs(state);
      runs.push_back(ctest);
      WriteRuns(state, runs);
    } else {
      RemoveState(state, /*cluster_too=*/true);  // a killed run's leftovers
      if (::pipe2(ready, O_CLOEXEC) != 0) {
        std::perror("pipe2");
        return 1;
      }
      WriteRuns(state, {ctest});
      std::cout.flush();
      guardian = ::fork();
      if (guardian < 0) {
        std::perror("fork");
        return 1;
      }
      if (guardian == 0) {
        ::close(lock.fd());
        ::close(ready[0]);
        Guard(state, ready[1]);
      }
      ::close(ready[1]);
      WriteAtomically(state / "guardian.pid", std::to_string(guardian));
    }
  }
  if (guardian < 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::string url;
    while ((url = ReadLine(state / "url")).empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (url.empty()) {
      std::cout << "the PostgreSQL server of a concurrent ctest run did not come up\n";
      return 1;
    }
    std::cout << "sharing the PostgreSQL server of a concurrent ctest run: " << url << "\n";
    return 0;
  }
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

/// Takes this ctest run off the list; the last one waits for the guardian to stop the server.
int Stop(const fs::path& state) {
  std::error_code ec;
  fs::create_directories(state, ec);
  pid_t guardian = -1;
  {
    StateLock lock(state);
    auto runs = Runs(state);
    runs.erase(std::remove(runs.begin(), runs.end(), ::getppid()), runs.end());
    WriteRuns(state, runs);
    if (!runs.empty()) {
      std::cout << "the server stays for " << runs.size() << " concurrent ctest run(s)\n";
      return 0;
    }
    guardian = GuardianPid(state);
  }
  if (!IsGuardian(guardian)) {
    std::cout << "no server to stop\n";
    return 0;
  }
  // The guardian sees the list empty within 0.1 s and stops the server, unless a concurrent
  // run joined meanwhile (then it stays for that one).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (IsGuardian(guardian)) {
    {
      StateLock lock(state);
      if (GuardianPid(state) == guardian && !Runs(state).empty()) {
        std::cout << "the server stays for a concurrent ctest run\n";
        return 0;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(guardian, SIGKILL);  // its server then gets SIGQUIT
      std::cout << "the PostgreSQL guardian did not stop within 30 s: killed\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::cout << "stopped this run's PostgreSQL\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "start" && mode != "stop") {
    std::cerr << "usage: postgres_test_server start|stop STATE_DIR\n";
    return 2;
  }
  const fs::path state = argv[2];
  return mode == "start" ? Start(state) : Stop(state);
}
