#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace gpuwerk::testing {

/// The source tree the test was built from (where scripts/, config/ and tests/support/ are):
/// $GPUWERK_SOURCE_DIR when set, else GPUWERK_TEST_SOURCE_DIR, which gpuwerk_test defines for
/// every test binary. Not derived from __FILE__: ccache's base_dir makes that path relative to
/// the compiler's directory, which is not where a test runs.
inline std::string SourceDir() {
  if (const char* dir = std::getenv("GPUWERK_SOURCE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
#ifdef GPUWERK_TEST_SOURCE_DIR
  return GPUWERK_TEST_SOURCE_DIR;
#else
  // tests/support/ → the root; absolute only when the compiler was given an absolute path.
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
#endif
}

}  // namespace gpuwerk::testing
