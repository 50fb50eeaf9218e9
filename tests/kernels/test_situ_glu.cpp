// SiTU-GLU (kernels.h situ_glu, situ_lanes.h): against the function computed in double with
// libm's tanh and exp, and every kernel set against the scalar set's bits, on lengths with
// every tail and on the values at the ends of its ranges.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_sets.h"

using namespace k3;
using namespace k3::test;

namespace {

// The model's betas (docs/model.md "Numerics": 4 tanh(g/4) sigmoid(g) * 25 tanh(u/25)).
constexpr float kB1 = 4.0f, kB2 = 25.0f;

double situ_exact(double g, double u) {
    return (kB1 * std::tanh(g / kB1)) * (1.0 / (1.0 + std::exp(-g))) * (kB2 * std::tanh(u / kB2));
}

float situ_one(const Kernels& k, float g, float u) {
    k.situ_glu(&g, &u, 1, kB1, kB2);
    return g;
}

}  // namespace

TEST_CASE("situ_glu: within 5e-7 of the exact function relative to its size, 0 and 1 at the gate's ends") {
    // Relative error where the value is not tiny; near a zero of tanh or deep in sigmoid's tail
    // the error is measured against the value's own scale (rel to max(|exact|, 1e-30)).
    double worst = 0, worst_g = 0, worst_u = 0;
    for (double g = -30; g <= 30; g += 0.00731) {
        for (double u : {-400.0, -31.7, -3.1, -0.2, -1e-3, 1e-6, 0.37, 2.5, 24.9, 90.0}) {
            const float gf = float(g), uf = float(u);
            const double want = situ_exact(gf, uf);
            const double got = situ_one(scalar_kernels(), gf, uf);
            const double rel = std::abs(got - want) / std::max(std::abs(want), 1e-30);
            if (rel > worst) worst = rel, worst_g = g, worst_u = u;
        }
    }
    CAPTURE(worst_g);
    CAPTURE(worst_u);
    MESSAGE("situ_glu worst relative error " << worst);
    CHECK(worst < 5e-7);  // measured 3.79e-7 (g = -11, in sigmoid's tail), 2 Dec 2026
    // tanh's small-argument end: tanh(x) ~ x, so situ(g, u) ~ sigmoid(g) g u (no cancellation)
    for (float x : {1e-3f, 1e-8f, 1e-15f}) {
        const double want = situ_exact(x, x);
        CHECK(std::abs(situ_one(scalar_kernels(), x, x) - want) <= 5e-7 * want);
    }
    // the gate's ends: sigmoid 1 and tanh 1 for a large g (4 * 25 tanh(u/25)); about 0 for a
    // very negative one; 0 for u = 0
    CHECK(situ_one(scalar_kernels(), 200.0f, 1000.0f) == 100.0f);
    CHECK(situ_one(scalar_kernels(), INFINITY, INFINITY) == 100.0f);
    CHECK(std::abs(situ_one(scalar_kernels(), -INFINITY, 1.0f)) < 1e-37f);
    CHECK(std::abs(situ_one(scalar_kernels(), -200.0f, 1.0f)) < 1e-37f);
    CHECK(situ_one(scalar_kernels(), 0.5f, 0.0f) == 0.0f);
    CHECK(situ_one(scalar_kernels(), 0.0f, 0.5f) == 0.0f);
    CHECK(std::isnan(situ_one(scalar_kernels(), NAN, 1.0f)));
    CHECK(std::isnan(situ_one(scalar_kernels(), 1.0f, NAN)));
}

TEST_CASE("situ_glu: every kernel set gives the scalar set's bits, at every length and split") {
    std::mt19937 rng(23);
    std::vector<float> specials = {0.0f,      -0.0f,     INFINITY, -INFINITY, NAN,      1e-30f, -1e-30f,
                                   1e-42f,    -1e-42f,   87.0f,    -87.0f,    89.0f,    -89.0f, 350.0f,
                                   -350.0f,   39.99f,    -40.01f,  0.6931f,   -2.7726f, 1e-4f,  -1e-4f,
                                   3.4e38f,   -3.4e38f,  5.5f,     -5.5f,     100.0f,   -100.0f};
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        for (int64_t n : {1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 100, 1000}) {
            CAPTURE(n);
            std::vector<float> g = random_floats(rng, size_t(n), 6.0f), u = random_floats(rng, size_t(n), 40.0f);
            for (size_t i = 0; i < size_t(n); ++i) {
                if (i % 5 == 2) g[i] = specials[(i * 7) % specials.size()];
                if (i % 7 == 3) u[i] = specials[(i * 3) % specials.size()];
            }
            std::vector<float> want = g, got = g, split = g;
            scalar_kernels().situ_glu(want.data(), u.data(), n, kB1, kB2);
            set.k->situ_glu(got.data(), u.data(), n, kB1, kB2);
            CHECK(same_bits(got.data(), want.data(), size_t(n)));
            // cut at an odd place: the elements' bits do not depend on where a span starts
            const int64_t cut = n / 3;
            set.k->situ_glu(split.data(), u.data(), cut, kB1, kB2);
            set.k->situ_glu(split.data() + cut, u.data() + cut, n - cut, kB1, kB2);
            CHECK(same_bits(split.data(), want.data(), size_t(n)));
        }
    }
}
