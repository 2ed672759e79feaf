// CHECK: aborts the process when an invariant of the program itself is broken (never for bad
// input, which is a Status). Active in every build type.
#pragma once

#include <cstdio>
#include <cstdlib>

#define ESTUARY_CHECK(cond)                                                            \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
