#include "core/run_tool.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

namespace gpuwerk::core {
namespace {

/// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&&) = delete;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// A memory file (close-on-exec: the child gets it through dup2) holding `data`, at offset 0.
Fd MemoryFile(const char* name, std::string_view data) {
  Fd fd(::memfd_create(name, MFD_CLOEXEC));
  if (!fd.ok()) return fd;
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fd();
    written += static_cast<size_t>(n);
  }
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) return Fd();
  return fd;
}

/// At most `max` bytes of `fd` from its start.
std::string ReadBack(const Fd& fd, size_t max) {
  std::string out;
  if (!fd.ok()) return out;
  char buf[4096];
  off_t offset = 0;
  while (out.size() < max) {
    const size_t want = std::min(sizeof(buf), max - out.size());
    const ssize_t n = ::pread(fd.get(), buf, want, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

std::unexpected<Error> NotStarted(const std::string& program, const std::string& why) {
  return Fail(ErrorCode::kUnavailable, "tool_not_started", "cannot run " + program + ": " + why);
}

}  // namespace

Result<ToolOutcome> RunTool(ToolRun run) {
  if (run.argv.empty()) {
    return Fail(ErrorCode::kInvalidArgument, "tool_argv_empty", "no program to run");
  }
  const std::string& program = run.argv[0];
  Fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  Fd in = MemoryFile("gpuwerk-tool-stdin", run.stdin_data);
  Fd out = run.capture_output ? MemoryFile("gpuwerk-tool-stdout", "") : Fd();
  Fd err =
      run.stderr_mode == ToolRun::Stderr::kSeparate ? MemoryFile("gpuwerk-tool-stderr", "") : Fd();
  std::vector<Fd> inputs;
  for (const std::string& data : run.input_files) {
    inputs.push_back(MemoryFile("gpuwerk-tool-input", data));
  }
  bool all_open = devnull.ok() && in.ok() && (!run.capture_output || out.ok()) &&
                  (run.stderr_mode != ToolRun::Stderr::kSeparate || err.ok());
  for (const Fd& fd : inputs) all_open = all_open && fd.ok();
  if (!all_open) return NotStarted(program, std::string("no memory file: ") + std::strerror(errno));

  const int out_fd = run.capture_output ? out.get() : devnull.get();
  int err_fd = devnull.get();
  if (run.stderr_mode == ToolRun::Stderr::kSeparate) err_fd = err.get();
  if (run.stderr_mode == ToolRun::Stderr::kMerged) err_fd = out_fd;

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  for (size_t i = 0; i < inputs.size(); ++i) {
    posix_spawn_file_actions_adddup2(&actions, inputs[i].get(), static_cast<int>(3 + i));
  }
  std::vector<char*> args;
  for (std::string& a : run.argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::string path = kToolPath;
  std::string locale = kToolLocale;
  char* env[] = {path.data(), locale.data(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return NotStarted(program, std::strerror(rc));

  ToolOutcome outcome;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + run.timeout;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      ::kill(pid, SIGKILL);
      return Fail(ErrorCode::kInternal, "tool_lost", "lost the process of " + program);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      outcome.end = ToolOutcome::End::kTimedOut;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (outcome.end != ToolOutcome::End::kTimedOut) {
    if (WIFEXITED(status)) {
      outcome.end = ToolOutcome::End::kExited;
      outcome.exit_code = WEXITSTATUS(status);
    } else {
      outcome.end = ToolOutcome::End::kSignalled;
      outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
  }
  if (run.capture_output) outcome.output = ReadBack(out, run.max_output_bytes);
  if (run.stderr_mode == ToolRun::Stderr::kSeparate) {
    outcome.error_output = ReadBack(err, run.max_output_bytes);
  }
  return outcome;
}

}  // namespace gpuwerk::core
