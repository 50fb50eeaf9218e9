// The kernel-set table (kernels.h, kernel_sets): every set's name, what the CPU must have, and
// how to reach its kernels. Dispatch, Engine::load's --kernels / K3_KERNELS rule, the daemon's
// allowed values, the usage texts, the tests and the benchmarks all read these rows; a new ISA is
// one row here plus its kernel files and their flags (engine/CMakeLists.txt).
#include <string_view>

#include "kernels/kernel_sets.h"

namespace k3 {
namespace {

// Each probe asks the CPU once (__builtin_cpu_supports on x86); a set this build does not
// compile (K3_HAVE_* unset) is never usable.
const Kernels* scalar_usable() { return &scalar_kernels(); }

const Kernels* avx2_usable() {
#if K3_HAVE_AVX2
    static const bool cpu_has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    }();
    return cpu_has ? &avx2_table() : nullptr;
#else
    return nullptr;
#endif
}

const Kernels* avx512_usable() {
#if K3_HAVE_AVX512
    // avx512.cpp is also compiled with AVX2/FMA/F16C for its 256-bit helpers.
    static const bool cpu_has = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
               __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    }();
    return cpu_has ? &avx512_table() : nullptr;
#else
    return nullptr;
#endif
}

// NEON (Advanced SIMD) is part of the AArch64 base ISA: building the set is the only condition.
const Kernels* neon_usable() {
#if K3_HAVE_NEON
    return &neon_table();
#else
    return nullptr;
#endif
}

constexpr KernelSet kSets[] = {
    {"scalar", "nothing (the portable reference)", scalar_usable},
    {"avx2", "AVX2, FMA and F16C (x86-64)", avx2_usable},
    {"avx512", "AVX-512 F, BW, VL and DQ (x86-64)", avx512_usable},
    {"neon", "Advanced SIMD (aarch64)", neon_usable},
};

const Kernels& best_usable() {
    const Kernels* best = &scalar_kernels();
    for (const KernelSet& set : kSets)
        if (const Kernels* k = set.usable()) best = k;
    return *best;
}

}  // namespace

std::span<const KernelSet> kernel_sets() { return kSets; }

const KernelSet* find_kernel_set(std::string_view name) {
    for (const KernelSet& set : kSets)
        if (name == set.name) return &set;
    return nullptr;
}

const Kernels& select_kernels() {
    static const Kernels& chosen = best_usable();
    return chosen;
}

}  // namespace k3
