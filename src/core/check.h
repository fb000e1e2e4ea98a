#pragma once

#include <cstdio>
#include <cstdlib>

/// Always-on invariant check (also in release builds). Never use it on input from users, the
/// network or agents: those get an Error value instead.
#define GPUWERK_CHECK(cond)                                                               \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
