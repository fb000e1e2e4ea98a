# Third-party dependencies, all from Debian bookworm packages (scripts/setup.sh installs them).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(CURL REQUIRED)
find_package(SQLite3 REQUIRED)
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)  # the PostgreSQL store (libpq-dev)
find_package(GTest)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET tomlplusplus)
if(NOT GPUWERK_FUZZ)
  # jemalloc for the server binary: the request path is allocation-heavy and glibc's malloc
  # loses ~25% of throughput to it (docs/benchmarks.md). Not with the sanitizers, which bring
  # their own allocator.
  if(NOT GPUWERK_SANITIZE)
    pkg_check_modules(JEMALLOC IMPORTED_TARGET jemalloc)
  endif()
  find_package(Boost 1.74 REQUIRED COMPONENTS system)
  # prometheus-cpp: /metrics (api/metrics.cc links its core library only: registry and text
  # serializer; gpuwerk serves the endpoint itself, so not the pull or push libraries).
  find_package(prometheus-cpp CONFIG REQUIRED)
  # libssh: the SSH relay (src/relay) and the agent's proof that a person's key logs in (C05).
  pkg_check_modules(LIBSSH REQUIRED IMPORTED_TARGET libssh)
  if(GPUWERK_AGENT)
    # libarchive: the tar archives the agent puts into containers (agent/authorized_keys.cc).
    pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
  endif()
  find_package(benchmark)
endif()
include(GoogleTest)
