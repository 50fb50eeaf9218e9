// Private to the AVX-512 files (avx512.cpp, avx512_situ.cpp; compiled with AVX-512 F/BW/VL/DQ):
// the lane operations of 16 fp32 lanes that the templates over lanes (situ_lanes.h,
// lane_kernels.h) are written with. Every one is a single IEEE operation or exact, so the lanes
// give the scalar set's bits. In an anonymous namespace: each file that includes it has its own
// copy, compiled with its own flags.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace k3 {
namespace {

struct Avx512Ops {
    using V = __m512;
    static constexpr int kWidth = 16;
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    // bf16 -> fp32 is exact: the 16 bits become the top half of the fp32 word.
    static V load_bf16(const uint16_t* p) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static V set1(float v) { return _mm512_set1_ps(v); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V div(V a, V b) { return _mm512_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c, one rounding
    static V max(V a, V b) { return _mm512_max_ps(a, b); }  // b when either is NaN, as ScalarOps
    static V min(V a, V b) { return _mm512_min_ps(a, b); }
    static V pow2(V n) {
        const __m512i e = _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127));
        return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
    }
    static V abs(V a) {
        return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
    }
    static V with_sign_of(V a, V b) {
        const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u));
        return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(a)),
                                                   _mm512_and_si512(sign, _mm512_castps_si512(b))));
    }
    static V nan_of(V g, V u, V r) {
        r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(u, u, _CMP_UNORD_Q), u);
        return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(g, g, _CMP_UNORD_Q), g);
    }
};

}  // namespace
}  // namespace k3
