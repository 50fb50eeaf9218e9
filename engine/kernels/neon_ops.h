// Private to the NEON files (neon.cpp, neon_situ.cpp; aarch64 builds): the lane operations of 4
// fp32 lanes that the templates over lanes (situ_lanes.h, lane_kernels.h) are written with.
// Every one is a single IEEE operation or exact, so the lanes give the scalar set's bits. max /
// min are a compare and a select: FMAX returns NaN when either input is, not the second. In an
// anonymous namespace: each file that includes it has its own copy.
#pragma once
#include <arm_neon.h>

#include <cstdint>

namespace k3 {
namespace {

struct NeonOps {
    using V = float32x4_t;
    static constexpr int kWidth = 4;
    static V load(const float* p) { return vld1q_f32(p); }
    static void store(float* p, V v) { vst1q_f32(p, v); }
    // bf16 -> fp32 is exact: the 16 bits become the top half of the fp32 word.
    static V load_bf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
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
}  // namespace k3
