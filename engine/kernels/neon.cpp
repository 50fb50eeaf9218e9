// NEON (AArch64 Advanced SIMD) kernels. NEON is part of the AArch64 base ISA, so this file
// needs no extra flags and dispatch.cpp offers it on every aarch64 build. Every kernel
// reproduces ref.cpp bit for bit: the reference's 16 lanes are four 128-bit registers (lanes
// 0-3, 4-7, 8-11, 12-15), its tree adds register 2 onto 0 and 3 onto 1, then 1 onto 0, then the
// two halves of 0, then lane 1 onto lane 0. vfmaq_f32 is one fused multiply-add per lane, the
// same single rounding as std::fma in the reference (-ffp-contract=off leaves intrinsics alone).
//
// Column tails (a width that is not a multiple of 16) are finished lane by lane with std::fma
// on the lanes the reference touches, rather than by zero padding: padding adds 0 * 0 to every
// lane, which turns a -0.0 partial sum into +0.0 where the reference leaves it alone.
//
// Speed: bf16 matvec streams one row at a time; matmul takes 2 rows x 2 tokens per tile (16
// accumulators of the 32 registers; the shared driver, tile_driver.h); MXFP4 is decoded in
// registers by a 64-byte table lookup (TBL on the group's row of scaled E2M1 values,
// kernel_sets.h), no multiply.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>

#include "kernels/kernel_sets.h"
#include "kernels/lane_kernels.h"
#include "kernels/neon_ops.h"
#include "kernels/tile_driver.h"

namespace k3 {
namespace {

// ---- shared pieces ----

// 16 lanes as four registers.
struct Acc16 {
    float32x4_t q[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
};

// The reference's tree: [k]+[k+8], [k]+[k+4], [k]+[k+2], [0]+[1].
inline float reduce_lanes(const Acc16& a) {
    const float32x4_t s8_lo = vaddq_f32(a.q[0], a.q[2]);  // lanes 0-3 of the 8
    const float32x4_t s8_hi = vaddq_f32(a.q[1], a.q[3]);  // lanes 4-7
    const float32x4_t s4 = vaddq_f32(s8_lo, s8_hi);
    const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

// Lanes 0..n-1 (n < 16) of acc += w[i] * x[i], as the reference does for a row's last partial
// block of 16 (element full + i goes to lane i).
template <typename WeightAt>
inline void add_tail(Acc16& acc, int64_t n, WeightAt weight_at, const float* x) {
    alignas(16) float lanes[16];
    for (int b = 0; b < 4; ++b) vst1q_f32(lanes + 4 * b, acc.q[b]);
    for (int64_t i = 0; i < n; ++i) lanes[i] = std::fma(weight_at(i), x[i], lanes[i]);
    for (int b = 0; b < 4; ++b) acc.q[b] = vld1q_f32(lanes + 4 * b);
}

// bf16 -> fp32 is exact: the 16 bits become the top half of the fp32 word.
inline float32x4_t widen_bf16_low(uint16x8_t w) { return vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(w), 16)); }
inline float32x4_t widen_bf16_high(uint16x8_t w) { return vreinterpretq_f32_u32(vshll_high_n_u16(w, 16)); }

// Software prefetch distance along a weight row (as the x86 sets).
constexpr int kPrefetchBytes = 4096;

// The shared tile driver's view of this file (tile_driver.h), and the tag its calls of
// bf16_tile, mxfp4_tile and split_even_odd below are found by: one token takes 2 MXFP4 rows a
// tile so two fma chains overlap; several tokens take 2 x 2 bf16 tiles and 1 row x 4 tokens of
// MXFP4.
struct NeonTiles {
    static constexpr int kBf16Rows = 2, kBf16Tokens = 2, kMxfp4RowsOneToken = 2, kMxfp4Rows = 1, kMxfp4Tokens = 4;
};

// ---- bf16 matvec / matmul ----

// R rows of W . TB tokens of X into Y[t * y_stride + r].
template <int R, int TB>
void bf16_tile(NeonTiles, const uint16_t* W, int64_t cols, const float* X, int64_t x_stride, float* Y, int64_t y_stride) {
    Acc16 acc[R][TB];
    const int64_t full = cols & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16) {
        if ((i & 31) == 0)
            for (int r = 0; r < R; ++r)
                __builtin_prefetch(reinterpret_cast<const char*>(W + r * cols + i) + kPrefetchBytes);
        float32x4_t w[R][4];
        for (int r = 0; r < R; ++r) {
            const uint16x8_t a = vld1q_u16(W + r * cols + i), b = vld1q_u16(W + r * cols + i + 8);
            w[r][0] = widen_bf16_low(a);
            w[r][1] = widen_bf16_high(a);
            w[r][2] = widen_bf16_low(b);
            w[r][3] = widen_bf16_high(b);
        }
        for (int t = 0; t < TB; ++t) {
            const float* x = X + t * x_stride + i;
            const float32x4_t x0 = vld1q_f32(x), x1 = vld1q_f32(x + 4), x2 = vld1q_f32(x + 8), x3 = vld1q_f32(x + 12);
            for (int r = 0; r < R; ++r) {
                acc[r][t].q[0] = vfmaq_f32(acc[r][t].q[0], w[r][0], x0);
                acc[r][t].q[1] = vfmaq_f32(acc[r][t].q[1], w[r][1], x1);
                acc[r][t].q[2] = vfmaq_f32(acc[r][t].q[2], w[r][2], x2);
                acc[r][t].q[3] = vfmaq_f32(acc[r][t].q[3], w[r][3], x3);
            }
        }
    }
    if (full < cols)
        for (int r = 0; r < R; ++r) {
            const uint16_t* w_tail = W + r * cols + full;
            for (int t = 0; t < TB; ++t)
                add_tail(acc[r][t], cols - full, [&](int64_t i) { return bf16_to_f32(w_tail[i]); },
                         X + t * x_stride + full);
        }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < TB; ++t) Y[t * y_stride + r] = reduce_lanes(acc[r][t]);
}

// ---- MXFP4 matvec / matmul ----

// x for MXFP4: per 32-element group, the 16 even elements then the 16 odd ones, so lane j of a
// group (its byte j) meets x[2j] for the low nibble and x[2j+1] for the high one.
void split_even_odd(NeonTiles, const float* x, float* out, int64_t cols) {
    for (int64_t g = 0; g < cols; g += 32)
        for (int b = 0; b < 4; ++b) {
            const float32x4x2_t pairs = vld2q_f32(x + g + 8 * b);  // de-interleaves 8 elements
            vst1q_f32(out + g + 4 * b, pairs.val[0]);
            vst1q_f32(out + g + 16 + 4 * b, pairs.val[1]);
        }
}

// Byte offsets of the 4 bytes of float lane k of a 64-byte table row, for codes in 4-lane
// quarter b of 16 codes: TBL index 4 * code + byte.
struct DecodeIndex {
    uint8x16_t spread[4];  // picks code 4b + lane for each byte of lane
    uint8x16_t byte_of_lane;
};
inline DecodeIndex make_decode_index() {
    DecodeIndex d;
    for (int b = 0; b < 4; ++b) {
        alignas(16) uint8_t s[16];
        for (int i = 0; i < 16; ++i) s[i] = static_cast<uint8_t>(4 * b + i / 4);
        d.spread[b] = vld1q_u8(s);
    }
    alignas(16) uint8_t o[16];
    for (int i = 0; i < 16; ++i) o[i] = static_cast<uint8_t>(i % 4);
    d.byte_of_lane = vld1q_u8(o);
    return d;
}

// The decode index of mxfp4_tile, built once.
const DecodeIndex& decode_index() {
    static const DecodeIndex d = make_decode_index();
    return d;
}

// 16 nibble codes (one per byte, 0..15) -> their 16 fp32 weights, looked up in the group's
// row of E2M1 x scale (the exact values the reference computes).
inline void decode16(uint8x16_t codes, const uint8x16x4_t& row, const DecodeIndex& d, float32x4_t out[4]) {
    const uint8x16_t times4 = vshlq_n_u8(codes, 2);
    for (int b = 0; b < 4; ++b) {
        const uint8x16_t idx = vaddq_u8(vqtbl1q_u8(times4, d.spread[b]), d.byte_of_lane);
        out[b] = vreinterpretq_f32_u8(vqtbl4q_u8(row, idx));
    }
}

// R rows x TB tokens; Xs holds split_even_odd x. Lane j of the 16 is the group's byte j: low
// nibble first, then high, as the reference.
template <int R, int TB>
void mxfp4_tile(NeonTiles, const uint8_t* P, const uint8_t* Sc, int64_t cols, const float* Xs, int64_t x_stride, float* Y,
                int64_t y_stride) {
    const DecodeIndex& d = decode_index();
    const ScaledE2M1Row* table = scaled_e2m1_table();
    const int64_t row_bytes = cols / 2, groups = cols / 32;
    const uint8x16_t low4 = vdupq_n_u8(0x0f);
    Acc16 acc[R][TB];
    for (int64_t g = 0; g < groups; ++g) {
        float32x4_t w_lo[R][4], w_hi[R][4];
        if ((g & 3) == 0)
            for (int r = 0; r < R; ++r)
                __builtin_prefetch(reinterpret_cast<const char*>(P + r * row_bytes + g * 16) + kPrefetchBytes / 2);
        for (int r = 0; r < R; ++r) {
            const uint8x16x4_t row = vld1q_u8_x4(reinterpret_cast<const uint8_t*>(table[Sc[r * groups + g]].v));
            const uint8x16_t bytes = vld1q_u8(P + r * row_bytes + g * 16);
            decode16(vandq_u8(bytes, low4), row, d, w_lo[r]);
            decode16(vshrq_n_u8(bytes, 4), row, d, w_hi[r]);
        }
        for (int t = 0; t < TB; ++t) {
            const float* xs = Xs + t * x_stride + g * 32;
            float32x4_t even[4], odd[4];
            for (int b = 0; b < 4; ++b) {
                even[b] = vld1q_f32(xs + 4 * b);
                odd[b] = vld1q_f32(xs + 16 + 4 * b);
            }
            for (int r = 0; r < R; ++r)
                for (int b = 0; b < 4; ++b) {
                    acc[r][t].q[b] = vfmaq_f32(acc[r][t].q[b], w_lo[r][b], even[b]);
                    acc[r][t].q[b] = vfmaq_f32(acc[r][t].q[b], w_hi[r][b], odd[b]);
                }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < TB; ++t) Y[t * y_stride + r] = reduce_lanes(acc[r][t]);
}

// ---- dot products ----

// Accumulates a[0..n) . b[0..n) into 16 lanes (element i -> lane i % 16).
inline void dot_lanes(const float* a, const float* b, int64_t n, Acc16& acc) {
    const int64_t full = n & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16)
        for (int q = 0; q < 4; ++q) acc.q[q] = vfmaq_f32(acc.q[q], vld1q_f32(a + i + 4 * q), vld1q_f32(b + i + 4 * q));
    if (full < n) add_tail(acc, n - full, [&](int64_t i) { return a[full + i]; }, b + full);
}

float dot_f32_neon(const float* a, const float* b, int64_t n) {
    Acc16 acc;
    dot_lanes(a, b, n, acc);
    return reduce_lanes(acc);
}

// ---- KDA recurrence ----

// ---- attention over cached positions ----

// Per query (kernels.h, attend_block): the block's scores as 16-lane dots, two keys at a time
// (two independent chains); the shared softmax fold; then out[j] * c followed by one fma chain
// over the block's positions (lane_kernels.h, add_block_values: the reference's order).
void attend_block_neon(const float* Q, int64_t q_stride, int nq, const int32_t* n_valid, const float* keys,
                       int64_t key_stride, const float* vals, int64_t val_stride, int dk, int dv, float scale,
                       float* m, float* l, float* acc, int64_t acc_stride, float* scratch) {
    for (int i = 0; i < nq; ++i) {
        const float* q = Q + i * q_stride;
        float* p = scratch + int64_t(i) * kAttendBlock;
        const int64_t n = n_valid[i];
        int64_t s = 0;
        for (; s + 2 <= n; s += 2) {
            Acc16 a0, a1;
            dot_lanes(q, keys + s * key_stride, dk, a0);
            dot_lanes(q, keys + (s + 1) * key_stride, dk, a1);
            p[s] = reduce_lanes(a0);
            p[s + 1] = reduce_lanes(a1);
        }
        for (; s < n; ++s) p[s] = dot_f32_neon(q, keys + s * key_stride, dk);
        const float c = fold_block_softmax(p, n, scale, &m[i], &l[i]);
        lanes::add_block_values<NeonOps>(p, n, vals, val_stride, dv, c, acc + i * acc_stride);
    }
}

// The trunk codec's bulk decode (kernels.h, trunk_words): the x86 sets' steps in NEON, TBL the
// 16-entry table shuffle, ZIP the interleaves.
size_t trunk_words_neon(const uint8_t* table, const uint8_t* nibbles, const uint8_t* low, size_t begin, size_t words,
                        uint8_t* dst) {
    const uint8x16_t tab = vld1q_u8(table);
    const uint8x16_t low4 = vdupq_n_u8(0x0f), escape = vdupq_n_u8(15);
    size_t i = begin;
    for (; i + 32 <= words; i += 32) {
        const uint8x16_t nb = vld1q_u8(nibbles + i / 2);
        const uint8x16_t lo_n = vandq_u8(nb, low4), hi_n = vshrq_n_u8(nb, 4);
        const uint8x16_t idx0 = vzip1q_u8(lo_n, hi_n), idx1 = vzip2q_u8(lo_n, hi_n);
        if (vmaxvq_u8(vorrq_u8(vceqq_u8(idx0, escape), vceqq_u8(idx1, escape))) != 0) break;
        const uint8x16_t h0 = vqtbl1q_u8(tab, idx0), h1 = vqtbl1q_u8(tab, idx1);
        const uint8x16_t l0 = vld1q_u8(low + i), l1 = vld1q_u8(low + i + 16);
        uint8_t* out = dst + 2 * i;
        vst1q_u8(out, vzip1q_u8(l0, h0));
        vst1q_u8(out + 16, vzip2q_u8(l0, h0));
        vst1q_u8(out + 32, vzip1q_u8(l1, h1));
        vst1q_u8(out + 48, vzip2q_u8(l1, h1));
    }
    return i;
}

}  // namespace

const Kernels& neon_table() {
    static const Kernels table = {
        .name = "neon",
        .matvec_bf16 = tiles::matvec_bf16<NeonTiles>,
        .matmul_bf16 = tiles::matmul_bf16<NeonTiles>,
        .matvec_mxfp4 = tiles::matvec_mxfp4<NeonTiles>,
        .matmul_mxfp4 = tiles::matmul_mxfp4<NeonTiles>,
        .dot_f32 = dot_f32_neon,
        .kda_step = lanes::kda_step<NeonOps>,
        .attend_block = attend_block_neon,
        .situ_glu = situ_glu_neon,
        .matvec_transposed_bf16 = lanes::matvec_transposed_bf16<NeonOps>,
        .trunk_words = trunk_words_neon,
    };
    return table;
}

}  // namespace k3
