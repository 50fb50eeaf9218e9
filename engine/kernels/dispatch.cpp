// Chooses the kernel set once per process: the best ISA this build and CPU support, unless
// K3_KERNELS=scalar|avx2|avx512 asks for a specific one (tests and benchmarks). A request the
// CPU or the build cannot honour falls back to the best lower set, with a note on stderr.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "kernels/kernel_sets.h"

namespace k3 {
namespace {

[[maybe_unused]] bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

[[maybe_unused]] bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    // avx512.cpp is also compiled with AVX2/FMA for its 256-bit helpers.
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
}

const Kernels& best_available() {
    if (const Kernels* k = avx512_kernels()) return *k;
    if (const Kernels* k = avx2_kernels()) return *k;
    return scalar_kernels();
}

}  // namespace

const Kernels& kernels_for_request(const char* request) {
    if (request == nullptr || *request == '\0') return best_available();
    const std::string_view want(request);
    if (want == "scalar") return scalar_kernels();
    const Kernels* got = nullptr;
    if (want == "avx512") {
        got = avx512_kernels();
    } else if (want == "avx2") {
        got = avx2_kernels();
    } else {
        const Kernels& best = best_available();
        std::fprintf(stderr, "k3serve: K3_KERNELS=%s is not one of scalar, avx2, avx512; using %s\n", request,
                     best.name);
        return best;
    }
    if (got != nullptr) return *got;
    // Fall back to the best set below the one requested.
    const Kernels& fallback = (want == "avx512" && avx2_kernels() != nullptr) ? *avx2_kernels() : scalar_kernels();
    std::fprintf(stderr, "k3serve: K3_KERNELS=%s is not supported by this %s; using %s\n", request,
#if defined(__x86_64__) || defined(__i386__)
                 "CPU or build",
#else
                 "build (not x86)",
#endif
                 fallback.name);
    return fallback;
}

const Kernels* avx2_kernels() {
#if K3_HAVE_AVX2
    static const bool usable = cpu_has_avx2();
    return usable ? &avx2_table() : nullptr;
#else
    return nullptr;
#endif
}

const Kernels* avx512_kernels() {
#if K3_HAVE_AVX512
    static const bool usable = cpu_has_avx512();
    return usable ? &avx512_table() : nullptr;
#else
    return nullptr;
#endif
}

const Kernels& select_kernels() {
    static const Kernels& chosen = kernels_for_request(std::getenv("K3_KERNELS"));
    return chosen;
}

}  // namespace k3
