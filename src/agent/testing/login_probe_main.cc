// Test-only: the confined login probe's child program for test binaries, which cannot run the
// gpuwerk binary's `login-probe` subcommand from /proc/self/exe (that is the test binary).
// Production runs `gpuwerk login-probe` (src/app/main.cc); both call LoginProbeMain.
#include <string>
#include <vector>

#include "agent/probe_process.h"

int main(int argc, char** argv) {
  return gpuwerk::agent::LoginProbeMain(std::vector<std::string>(argv + 1, argv + argc));
}
