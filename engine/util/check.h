// Invariant checks. K3_CHECK is always on and aborts with file:line and a message: it guards
// programmer errors, never user input (user input gets k3::Error or a Status). K3_DCHECK is
// for hot loops and compiles away outside debug builds.
#pragma once
#include <cstdio>
#include <cstdlib>

#define K3_CHECK(cond, ...)                                                             \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            std::fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            std::fprintf(stderr, __VA_ARGS__);                                          \
            std::fprintf(stderr, "\n");                                                 \
            std::abort();                                                               \
        }                                                                               \
    } while (0)

#ifndef NDEBUG
#define K3_DCHECK(cond, ...) K3_CHECK(cond, __VA_ARGS__)
#else
#define K3_DCHECK(cond, ...) \
    do {                     \
    } while (0)
#endif
