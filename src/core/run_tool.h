#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"

namespace gpuwerk::core {

/// The fixed environment a tool run gets, nothing of the caller's: the system PATH and the C
/// locale (so messages and number formats do not depend on the operator's shell).
inline constexpr const char* kToolPath = "PATH=/usr/local/bin:/usr/bin:/bin";
inline constexpr const char* kToolLocale = "LC_ALL=C";

/// What to run and how (RunTool).
struct ToolRun {
  /// The program and its arguments; no shell. argv[0] is looked up on kToolPath when it holds no
  /// '/'. Must not be empty.
  std::vector<std::string> argv;
  /// Bytes the child reads on its standard input (a memory file; empty: it reads end-of-file at
  /// once).
  std::string stdin_data;
  /// Read-only inputs the child finds on its descriptors 3, 4, … in this order (memory files, so
  /// nothing touches the disk); argv names them as /dev/fd/3, /dev/fd/4, …
  std::vector<std::string> input_files;
  /// Where the child's standard error goes: to `ToolOutcome::error_output` (kSeparate), into
  /// `ToolOutcome::output` after standard output's bytes as written (kMerged), or nowhere
  /// (kDiscard, like standard output when `capture_output` is false).
  enum class Stderr { kSeparate, kMerged, kDiscard };
  Stderr stderr_mode = Stderr::kSeparate;
  /// Whether standard output is kept (false: /dev/null).
  bool capture_output = true;
  /// The most bytes kept of each captured stream; the rest is dropped (read back, never
  /// growing the caller's memory further).
  size_t max_output_bytes = 64 * 1024;
  /// How long the child may run, wall clock from its start; then it is killed (SIGKILL) and
  /// reaped.
  std::chrono::milliseconds timeout{10'000};
};

/// How a tool run ended.
struct ToolOutcome {
  enum class End {
    kExited,     ///< it exited; `exit_code` holds its status (127: the program was not found)
    kSignalled,  ///< a signal ended it (`signal` says which)
    kTimedOut,   ///< it outlived `ToolRun::timeout` and was killed
  };
  End end = End::kExited;
  int exit_code = -1;        ///< the exit status when kExited, else -1
  int signal = 0;            ///< the signal's number when kSignalled, else 0
  std::string output;        ///< standard output (and standard error when kMerged), capped
  std::string error_output;  ///< standard error when kSeparate, capped
};

/// Runs an outside tool (e.g. OpenSSH's ssh-keygen) as a child process through posix_spawnp(3)
/// with the fixed environment above only, its standard descriptors and `input_files` wired as
/// ToolRun says and no other descriptor of ours (they are close-on-exec), waits for it at most
/// `timeout` and reaps it. Blocks the calling thread for up to `timeout` (it polls every 2 ms);
/// thread-safe.
/// Errors: kInvalidArgument "tool_argv_empty" when `argv` is empty; kUnavailable
/// "tool_not_started" when the memory files cannot be made or posix_spawnp fails (the message
/// names argv[0] and strerror); kInternal "tool_lost" when waitpid fails (the child is then
/// killed). A program that is not found is "tool_not_started" (glibc reports the failed exec to
/// posix_spawnp), or an exit status of 127 where a C library reports it from the child.
Result<ToolOutcome> RunTool(ToolRun run);

}  // namespace gpuwerk::core
