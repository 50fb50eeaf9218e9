// Which kernel sets this build and CPU can run, the best of them (checked once per process), and
// what a set's name maps to. Whether a request is honoured or refused is decided in one place,
// Engine::load (api/engine.cpp), for --kernels and K3_KERNELS alike.
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
    if (const Kernels* k = neon_kernels()) return *k;
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
    } else if (want == "neon") {
        got = neon_kernels();
    } else {
        return best_available();
    }
    if (got != nullptr) return *got;
    // The best set below the one requested.
    return (want == "avx512" && avx2_kernels() != nullptr) ? *avx2_kernels() : scalar_kernels();
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

// NEON (Advanced SIMD) is part of the AArch64 base ISA: every aarch64 CPU has it, so building
// the set is the only condition.
const Kernels* neon_kernels() {
#if K3_HAVE_NEON
    return &neon_table();
#else
    return nullptr;
#endif
}

const Kernels& select_kernels() {
    static const Kernels& chosen = best_available();
    return chosen;
}

}  // namespace k3
