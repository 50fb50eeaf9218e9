// SiTU-GLU for the NEON set: situ_lanes.h's operations on 4 lanes (the scalar set's bits).
// max / min are a compare and a select: FMAX returns NaN when either input is, not the second.
#include <arm_neon.h>

#include "kernels/situ_lanes.h"

namespace k3 {
namespace {

struct NeonOps {
    using V = float32x4_t;
    static V load(const float* p) { return vld1q_f32(p); }
    static void store(float* p, V v) { vst1q_f32(p, v); }
    static V set1(float v) { return vdupq_n_f32(v); }
    static V add(V a, V b) { return vaddq_f32(a, b); }
    static V sub(V a, V b) { return vsubq_f32(a, b); }
    static V mul(V a, V b) { return vmulq_f32(a, b); }
    static V div(V a, V b) { return vdivq_f32(a, b); }
    static V fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }  // c + a * b, one rounding
    static V max(V a, V b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
    static V min(V a, V b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
    static V pow2(V n) {
        const int32x4_t e = vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127));
        return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
    }
    static V abs(V a) { return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vdupq_n_u32(0x7fffffffu))); }
    static V with_sign_of(V a, V b) { return vbslq_f32(vdupq_n_u32(0x80000000u), b, a); }
    static V nan_of(V g, V u, V r) {
        r = vbslq_f32(vceqq_f32(u, u), r, u);
        return vbslq_f32(vceqq_f32(g, g), r, g);
    }
};

}  // namespace

void situ_glu_neon(float* g, const float* u, int64_t n, float b1, float b2) {
    situ::situ_glu_span<NeonOps, 4>(g, u, n, b1, b2);
}

}  // namespace k3
