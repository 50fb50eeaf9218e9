// SiTU-GLU for the AVX2 set: situ_lanes.h's operations on 8 lanes (the scalar set's bits).
#include <immintrin.h>

#include "kernels/situ_lanes.h"

namespace k3 {
namespace {

struct Avx2Ops {
    using V = __m256;
    static V load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
    static V set1(float v) { return _mm256_set1_ps(v); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
    static V div(V a, V b) { return _mm256_div_ps(a, b); }
    static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
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

void situ_glu_avx2(float* g, const float* u, int64_t n, float b1, float b2) {
    situ::situ_glu_span<Avx2Ops, 8>(g, u, n, b1, b2);
}

}  // namespace k3
