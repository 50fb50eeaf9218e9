// Private to engine/kernels: SiTU-GLU (docs/model.md "Numerics": b1 tanh(g/b1) sigmoid(g) *
// b2 tanh(u/b2)) written once over a lane type, so the scalar set and every SIMD set run the same
// operations in the same order and give the same bits (kernels.h, situ_glu). libm's tanhf and
// expf are calls per element that no set can reproduce lane by lane; on the demo's 256-wide
// layers they cost about as much as the matmuls (docs/performance.md, "Long prompts").
//
// An ISA provides O (avx2_ops.h, avx512_ops.h, neon_ops.h; ScalarOps below): a lane type V
// and set1, add, sub, mul, div, fma (fused), max / min with the SSE rule (a > b ? a : b,
// a < b ? a : b: the second operand when either is NaN), load, store, pow2 (2^n for integral n
// in [-126, 127], by the exponent bits), abs, with_sign_of (|a| with b's sign bit) and
// nan_of(g, u, r) (g if g is NaN, else u if u is NaN, else r). Every one of them is a single
// IEEE operation or exact, so the lanes' results are the scalar ones.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/kernel_sets.h"

namespace k3::situ {

// Taylor coefficients 1/k! of expm1(r) = r + r^2 (1/2 + r/6 + ... + r^6/8!), |r| <= ln2/2:
// the first term left out is r^9/9!, under 2^-26 of r there.
inline constexpr float kExpm1Poly[7] = {1.0f / 2, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040,
                                        1.0f / 40320};
// Below -20, expm1 rounds to -1 and tanh's 1 - 2/(e^2a + 1) to 1 in fp32 (tanh(10) = 1 - 4e-9).
inline constexpr float kTanhExpm1Min = -20.0f;

// e^x with x clamped to [kSoftmaxExpMin, kSoftmaxExpMax]: softmax_exp's operations
// (kernel_sets.h), so its bits inside that range, and no special cases (the clamp makes
// sigmoid's 1 / (1 + e^-g) 0 or 1 at the ends; a NaN input is put back by the caller).
template <class O>
typename O::V exp_clamped(typename O::V x) {
    using V = typename O::V;
    x = O::min(O::max(x, O::set1(kSoftmaxExpMin)), O::set1(kSoftmaxExpMax));
    const V shift = O::set1(kRoundShift);
    const V n = O::sub(O::add(O::mul(x, O::set1(kLog2e)), shift), shift);
    V r = O::fma(n, O::set1(-kLn2Hi), x);
    r = O::fma(n, O::set1(-kLn2Lo), r);
    V p = O::set1(kExpPoly[7]);
    for (int k = 6; k >= 0; --k) p = O::fma(p, r, O::set1(kExpPoly[k]));
    return O::mul(p, O::pow2(n));
}

// tanh(x) = -expm1(-2|x|) / (2 + expm1(-2|x|)) with x's sign: no cancellation near 0 (expm1's
// polynomial is r times a series in r), and near 1 for large |x|. expm1(y) = 2^n (1 + p) - 1
// = fma(2^n, p, 2^n - 1) with y = n ln2 + r reduced as in exp_clamped.
template <class O>
typename O::V tanh_lanes(typename O::V x) {
    using V = typename O::V;
    const V y = O::max(O::mul(O::abs(x), O::set1(-2.0f)), O::set1(kTanhExpm1Min));
    const V shift = O::set1(kRoundShift);
    const V n = O::sub(O::add(O::mul(y, O::set1(kLog2e)), shift), shift);
    V r = O::fma(n, O::set1(-kLn2Hi), y);
    r = O::fma(n, O::set1(-kLn2Lo), r);
    V h = O::set1(kExpm1Poly[6]);
    for (int k = 5; k >= 0; --k) h = O::fma(h, r, O::set1(kExpm1Poly[k]));
    const V p = O::fma(h, O::mul(r, r), r);
    const V s = O::pow2(n);
    const V e = O::fma(s, p, O::sub(s, O::set1(1.0f)));
    const V t = O::div(O::sub(O::set1(0.0f), e), O::add(O::set1(2.0f), e));
    return O::with_sign_of(t, x);
}

// (b1 tanh(g / b1)) sigmoid(g) * (b2 tanh(u / b2)), sigmoid(g) = 1 / (1 + e^-g); NaN in g or u
// comes out as that NaN.
template <class O>
typename O::V situ_glu_lanes(typename O::V g, typename O::V u, float b1, float b2) {
    using V = typename O::V;
    const V one = O::set1(1.0f);
    const V sig = O::div(one, O::add(one, exp_clamped<O>(O::sub(O::set1(0.0f), g))));
    const V a = O::mul(O::mul(O::set1(b1), tanh_lanes<O>(O::div(g, O::set1(b1)))), sig);
    const V r = O::mul(a, O::mul(O::set1(b2), tanh_lanes<O>(O::div(u, O::set1(b2)))));
    return O::nan_of(g, u, r);
}

// One lane: the scalar set, and every SIMD set's last n % width elements.
struct ScalarOps {
    using V = float;
    static float load(const float* p) { return *p; }
    static void store(float* p, float v) { *p = v; }
    static float set1(float v) { return v; }
    static float add(float a, float b) { return a + b; }
    static float sub(float a, float b) { return a - b; }
    static float mul(float a, float b) { return a * b; }
    static float div(float a, float b) { return a / b; }
    static float fma(float a, float b, float c) { return std::fma(a, b, c); }
    static float max(float a, float b) { return a > b ? a : b; }
    static float min(float a, float b) { return a < b ? a : b; }
    static float pow2(float n) {
        return std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
    }
    static float abs(float a) { return std::bit_cast<float>(std::bit_cast<uint32_t>(a) & 0x7fffffffu); }
    static float with_sign_of(float a, float b) {
        return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & 0x7fffffffu) |
                                    (std::bit_cast<uint32_t>(b) & 0x80000000u));
    }
    static float nan_of(float g, float u, float r) { return std::isnan(g) ? g : (std::isnan(u) ? u : r); }
};

// g[i] = situ_glu(g[i], u[i]) for i < n: O's W lanes at a time, the rest one at a time.
template <class O, int W>
void situ_glu_span(float* g, const float* u, int64_t n, float b1, float b2) {
    int64_t i = 0;
    for (; i + W <= n; i += W) O::store(g + i, situ_glu_lanes<O>(O::load(g + i), O::load(u + i), b1, b2));
    for (; i < n; ++i) g[i] = situ_glu_lanes<ScalarOps>(g[i], u[i], b1, b2);
}

}  // namespace k3::situ
