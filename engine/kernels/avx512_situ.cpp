// SiTU-GLU for the AVX-512 set: situ_lanes.h's operations on 16 lanes (the scalar set's bits).
// GCC 12's AVX-512 headers build some intrinsics on _mm512_undefined_*(), which its
// uninitialised-use analysis reports after inlining (a known false positive, as in avx512.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/situ_lanes.h"

namespace k3 {
namespace {

struct Avx512Ops {
    using V = __m512;
    static V load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
    static V set1(float v) { return _mm512_set1_ps(v); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
    static V div(V a, V b) { return _mm512_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
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

void situ_glu_avx512(float* g, const float* u, int64_t n, float b1, float b2) {
    situ::situ_glu_span<Avx512Ops, 16>(g, u, n, b1, b2);
}

}  // namespace k3
