#pragma once

// What the end-to-end suites under tests/e2e share: one podman API service (scripts/engine.sh)
// and the real instance image (scripts/instance-image/build.sh) per test binary, and the small
// helpers every e2e test needs around the real `gpuwerk` processes. Needs root (rootful podman).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>

#include "tests/support/run_command.h"
#include "tests/support/source_dir.h"
#include "tests/support/ssh_keygen.h"

extern char** environ;

namespace gpuwerk::testing {

/// The instance image the e2e suites build and the server launches.
inline constexpr const char* kInstanceImage = "localhost/gpuwerk-instance:bookworm";
/// The labels the agent gives each container: its instance, its host.
inline constexpr const char* kInstanceLabel = "gpuwerk.instance";
inline constexpr const char* kHostLabel = "gpuwerk.host";
/// The first operator the e2e servers are started with, and every test person's password.
inline constexpr const char* kOperatorEmail = "operator@example.test";
inline constexpr const char* kOperatorPassword = "operator password 1";
inline constexpr const char* kPassword = "correct horse battery";

/// Runs shell text in $TMPDIR (see RunCommand).
inline CommandResult Script(const std::string& command) {
  return RunCommand(std::filesystem::temp_directory_path(), command);
}

/// The last `lines` lines of a file, for failure messages.
inline std::string Tail(const std::filesystem::path& file, size_t lines = 60) {
  const std::string text = ReadFile(file);
  size_t pos = text.size();
  for (size_t n = 0; n <= lines; ++n) {
    if (pos == 0) return text;
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

/// The environment for a child `gpuwerk` process: every GPUWERK_* variable of the caller set to
/// "" (so none of the caller's settings leak in); add the test's own on top.
inline std::map<std::string, std::string> CleanEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    if (kv.starts_with("GPUWERK_")) env[kv.substr(0, kv.find('='))] = "";
  }
  return env;
}

/// CleanEnv() plus `name`=`value`: how a test hands a child its credential (an agent's
/// GPUWERK_HOST_TOKEN, a relay's GPUWERK_RELAY_TOKEN), never on its command line.
inline std::map<std::string, std::string> CleanEnvWith(const std::string& name,
                                                       const std::string& value) {
  std::map<std::string, std::string> env = CleanEnv();
  env[name] = value;
  return env;
}

/// The test binary's engine: one podman API service in a fresh temp directory and the instance
/// image, set up once per process before the first test and stopped after the last one.
/// `setup_error` says why the suite cannot run ("" when it can); each test checks it in SetUp
/// (ExpectEngineReady).
class EngineEnvironment : public ::testing::Environment {
 public:
  /// `dir_prefix`: the temp directory's name before the random suffix (e.g. "gpuwerk-e2e-engine").
  explicit EngineEnvironment(std::string dir_prefix) : dir_prefix_(std::move(dir_prefix)) {}

  void SetUp() override {
    State& s = state();
    s = State{};
    if (::geteuid() != 0) {
      s.setup_error = "needs root: rootful podman and containers";
      return;
    }
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (dir_prefix_ + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      s.setup_error = "mkdtemp failed";
      return;
    }
    s.dir = tmpl;
    s.socket = (s.dir / "podman.sock").string();
    ::setenv("CONTAINERS_CONF", (SourceDir() + "/config/containers.conf").c_str(), 1);
    CommandResult started = Start();
    if (started.exit_code != 0) {
      s.setup_error = "engine.sh start failed: " + started.out + started.err;
      return;
    }
    s.started = true;
    CommandResult built =
        Script(SourceDir() + "/scripts/instance-image/build.sh " + std::string(kInstanceImage));
    if (built.exit_code != 0) {
      s.setup_error = "instance image build failed: " + built.out + built.err;
    }
  }

  void TearDown() override {
    State& s = state();
    if (s.started) Stop();
    if (!s.dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(s.dir, ec);
    }
    s = State{};
  }

  /// The engine's unix socket path.
  static const std::string& socket() { return state().socket; }
  /// The directory of the socket, the service's pid file and its log (podman.log).
  static const std::filesystem::path& dir() { return state().dir; }
  /// Why the suite cannot run; "" when it can.
  static const std::string& setup_error() { return state().setup_error; }
  /// (Re)starts the service on the same socket (scripts/engine.sh start; a no-op when it runs).
  static CommandResult Start() {
    return Script(SourceDir() + "/scripts/engine.sh start " + dir().string());
  }
  /// Stops the service (containers keep running).
  static CommandResult Stop() {
    return Script(SourceDir() + "/scripts/engine.sh stop " + dir().string());
  }

 private:
  struct State {
    std::filesystem::path dir;
    std::string socket;
    std::string setup_error;
    bool started = false;
  };
  static State& state() {
    static State s;
    return s;
  }
  std::string dir_prefix_;
};

/// Registers the engine environment for this test binary; call once at namespace scope:
/// `const auto* const kEngine = RegisterEngineEnvironment("gpuwerk-e2e-engine");`.
inline ::testing::Environment* RegisterEngineEnvironment(const std::string& dir_prefix) {
  return ::testing::AddGlobalTestEnvironment(new EngineEnvironment(dir_prefix));
}

}  // namespace gpuwerk::testing
