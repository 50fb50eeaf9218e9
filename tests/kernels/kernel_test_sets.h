// The kernel tests' shared helpers: every kernel set this machine runs, seeded random inputs,
// and bit-for-bit comparison (the ISA sets must reproduce the scalar reference exactly).
#pragma once
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernel_sets.h"

namespace k3::test {

struct NamedSet {
    std::string name;
    const Kernels* k;
};

// Every kernel set this machine can run, in the table's order (scalar first). A set it cannot
// run is reported as a skipped test case of its own ("kernels: the avx512 set is available on
// this machine", test_kernel_dispatch.cpp), not only in a message.
inline std::vector<NamedSet> all_sets() {
    std::vector<NamedSet> sets;
    for (const KernelSet& set : kernel_sets()) {
        if (const Kernels* k = set.usable())
            sets.push_back({set.name, k});
        else
            MESSAGE(std::string(set.name) << " kernel set skipped: not built or not supported by this CPU");
    }
    return sets;
}

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float stddev = 1.0f) {
    std::normal_distribution<float> dist(0.0f, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

inline bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace k3::test
