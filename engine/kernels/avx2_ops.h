// Private to the AVX2 files (avx2.cpp, avx2_situ.cpp; compiled with -mavx2 -mfma -mf16c): the
// lane operations of 8 fp32 lanes that the templates over lanes (situ_lanes.h, lane_kernels.h)
// are written with. Every one is a single IEEE operation or exact, so the lanes give the scalar
// set's bits. In an anonymous namespace: each file that includes it has its own copy, compiled
// with its own flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace k3 {
namespace {

struct Avx2Ops {
    using V = __m256;
    static constexpr int kWidth = 8;
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
    // bf16 -> fp32 is exact: the 16 bits become the top half of the fp32 word.
    static V load_bf16(const uint16_t* p) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    static V set1(float v) { return _mm256_set1_ps(v); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V div(V a, V b) { return _mm256_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c, one rounding
    static V max(V a, V b) { return _mm256_max_ps(a, b); }  // b when either is NaN, as ScalarOps
    static V min(V a, V b) { return _mm256_min_ps(a, b); }
    static V pow2(V n) {
        const __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127));
        return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
    }
    static V abs(V a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
    static V with_sign_of(V a, V b) {
        const V sign = _mm256_castsi256_ps(_mm256_set1_epi32(int32_t(0x80000000u)));
        return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, b));
    }
    static V nan_of(V g, V u, V r) {
        r = _mm256_blendv_ps(r, u, _mm256_cmp_ps(u, u, _CMP_UNORD_Q));
        return _mm256_blendv_ps(r, g, _mm256_cmp_ps(g, g, _CMP_UNORD_Q));
    }
};

}  // namespace
}  // namespace k3
