// The online softmax's exponential and fold (kernel_sets.h: softmax_exp, fold_block_softmax),
// against libm's double exp, and the AVX-512 attention paths that fold 16 scores at a time and
// add two queries' values together, against the scalar set's bits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kernel_sets.h"
#include "kernels/kernels.h"

using namespace k3;

namespace {

// Distance in units in the last place between a float and the float nearest to a double.
int64_t ulps_from(float got, double want) {
    const float w = static_cast<float>(want);
    int32_t a = 0, b = 0;
    std::memcpy(&a, &got, sizeof a);
    std::memcpy(&b, &w, sizeof b);
    return std::llabs(int64_t(a) - int64_t(b));
}

std::vector<const Kernels*> sets_here() {
    std::vector<const Kernels*> sets;
    for (const KernelSet& set : kernel_sets())
        if (const Kernels* k = set.usable()) sets.push_back(k);
    return sets;
}

}  // namespace

TEST_CASE("softmax_exp: within 1 ulp of exp over its range, 0 below it, inf above, NaN kept") {
    int64_t worst = 0;
    double worst_at = 0;
    for (double x = kSoftmaxExpMin; x <= kSoftmaxExpMax; x += 0.00123) {
        const float xf = static_cast<float>(x);
        const int64_t d = ulps_from(softmax_exp(xf), std::exp(double(xf)));
        if (d > worst) worst = d, worst_at = x;
    }
    CAPTURE(worst_at);
    CHECK(worst <= 1);
    CHECK(softmax_exp(0.0f) == 1.0f);
    CHECK(softmax_exp(-0.0f) == 1.0f);
    CHECK(softmax_exp(-INFINITY) == 0.0f);
    CHECK(softmax_exp(-90.0f) == 0.0f);
    CHECK(std::isinf(softmax_exp(89.0f)));
    CHECK(std::isnan(softmax_exp(NAN)));
}

TEST_CASE("fold_block_softmax: the block's max, its probabilities and the running sum rescaled") {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int n : {1, 15, 16, 17, 40, kAttendBlock}) {
        CAPTURE(n);
        std::vector<float> s(static_cast<size_t>(kAttendBlock));
        for (int i = 0; i < n; ++i) s[size_t(i)] = nd(rng);
        const std::vector<float> raw = s;
        const float scale = 0.7f, m0 = 1.5f, l0 = 2.25f;
        float m = m0, l = l0;
        const float c = fold_block_softmax(s.data(), n, scale, &m, &l);
        double mx = m0, sum = 0;
        for (int i = 0; i < n; ++i) mx = std::max(mx, double(raw[size_t(i)] * scale));
        CHECK(m == static_cast<float>(mx));
        CHECK(c == doctest::Approx(std::exp(m0 - mx)).epsilon(1e-6));
        for (int i = 0; i < n; ++i) {
            const double p = std::exp(double(raw[size_t(i)] * scale) - mx);
            CHECK(s[size_t(i)] == doctest::Approx(p).epsilon(1e-6));
            sum += p;
        }
        CHECK(l == doctest::Approx(l0 * std::exp(m0 - mx) + sum).epsilon(1e-6));
    }
}

// K3-like widths: 80-wide keys of the demo's latent plus rope, values 64 + a 36-column tail, so
// both the 64-column and the tail paths of the value sums run, for lone queries and pairs.
TEST_CASE("attention tiles with wide values give every set the scalar set's bits") {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.6f);
    const int dk = 80, dv = 100, n_q = 16;
    const int64_t stride = 112, n_pos = 300;
    std::vector<float> rows(size_t(n_pos * stride)), Q(size_t(n_q * dk));
    for (float& v : rows) v = nd(rng);
    for (float& v : Q) v = nd(rng);
    std::vector<float> want(size_t(n_q * dv)), scratch(size_t(16 * kAttendBlock));
    // queries 2j and 2j+1 see the same keys (a pair), then one key more every second pair
    auto n_keys = [&](int i) { return int32_t(n_pos - 40 + (i / 2) * 3 + (i / 4)); };
    for (int i = 0; i < n_q; ++i)
        attend_head(scalar_kernels(), &Q[size_t(i * dk)], rows.data(), stride, rows.data() + 3, stride, n_keys(i), dk,
                    dv, 0.125f, &want[size_t(i * dv)], scratch.data());
    for (const Kernels* k : sets_here()) {
        CAPTURE(k->name);
        std::vector<float> acc(size_t(n_q * dv), 0.0f), m(size_t(n_q), -INFINITY), l(size_t(n_q), 0.0f);
        std::vector<int32_t> n_valid(static_cast<size_t>(n_q));
        for (int32_t b0 = 0; b0 < n_keys(n_q - 1); b0 += kAttendBlock) {
            int i0 = 0;
            while (n_keys(i0) <= b0) ++i0;
            for (int i = i0; i < n_q; ++i) n_valid[size_t(i)] = std::min<int32_t>(kAttendBlock, n_keys(i) - b0);
            k->attend_block(&Q[size_t(i0 * dk)], dk, n_q - i0, &n_valid[size_t(i0)], rows.data() + b0 * stride, stride,
                            rows.data() + b0 * stride + 3, stride, dk, dv, 0.125f, &m[size_t(i0)], &l[size_t(i0)],
                            &acc[size_t(i0 * dv)], dv, scratch.data());
        }
        for (int i = 0; i < n_q; ++i)
            for (int j = 0; j < dv; ++j) acc[size_t(i * dv + j)] = acc[size_t(i * dv + j)] / l[size_t(i)];
        CHECK(std::memcmp(acc.data(), want.data(), acc.size() * sizeof(float)) == 0);
    }
}
