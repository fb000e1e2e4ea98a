#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support/ssh_keygen.h"

namespace gpuwerk::testing {

/// What a finished command left behind.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// Runs `command` with /bin/sh in `dir`, feeding `input` on stdin, and captures both outputs.
/// `command` is shell text: quote arguments yourself (paths from TempDir have no spaces).
inline CommandResult RunCommand(const std::filesystem::path& dir, const std::string& command,
                                const std::string& input = "") {
  const auto in = dir / "cmd.in";
  const auto out = dir / "cmd.out";
  const auto err = dir / "cmd.err";
  {
    std::ofstream f(in, std::ios::binary);
    f << input;
  }
  const std::string full = "cd '" + dir.string() + "' && (" + command + ") <'" + in.string() +
                           "' >'" + out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

/// The gpuwerk binary of this build tree.
inline std::string GpuwerkBinary() {
  if (const char* dir = std::getenv("GPUWERK_BINARY_DIR"); dir && *dir) {
    return std::string(dir) + "/src/app/gpuwerk";
  }
  return std::string(GPUWERK_TEST_BINARY_DIR) + "/src/app/gpuwerk";
}

}  // namespace gpuwerk::testing
